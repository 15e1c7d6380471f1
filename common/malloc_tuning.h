// Malloc settings for daemons whose memory churns in large blocks: a data node's RocksDB fills a
// memtable through 1 MiB arena blocks and frees them all when it is flushed; a gateway takes a
// fresh buffer for each NBD read's answer (1 MiB for a 1 MiB read) and frees it once sent.
//
// With glibc's defaults those blocks are mapped fresh and unmapped when freed (or trimmed back to
// the kernel soon after), so every memtable writes into pages the kernel must fault in: 2-4.7
// faults per durable client write on each data node, at 17.8 us a fault on a 2-core KVM guest
// (docs/benchmarks.md, "What a page fault costs here"). KeepFreedMemoryForReuse has malloc serve
// blocks up to 32 MiB from its heaps, never give freed memory back (the process stays at its
// peak, which for a data node is its memtables and block cache) and keep two arenas, so that the
// next memtable takes the pages of the last one. Measured with the same settings given to every
// daemon through GLIBC_TUNABLES: 0.5-0.8 faults per write on the data nodes against 2.4-2.7, and
// 9-13% less CPU per durable write over all daemons (data nodes 19-23% less), three rounds; with
// the data nodes' own settings (this function) against glibc's defaults, one round: 1.48 faults
// and 452 us per write on the data nodes against 3.18 and 493. A gateway relaying 1 MiB reads
// (fio QD4, 6 s): 1-2 thousand faults against 12-60 thousand, 8-30% less gateway CPU per MiB
// (docs/benchmarks.md). Not for cache nodes: no fewer faults there, CPU per write no better.
#ifndef RINGCACHE_COMMON_MALLOC_TUNING_H_
#define RINGCACHE_COMMON_MALLOC_TUNING_H_

#include <string>

namespace ringcache {

// Sets the malloc options above, unless GLIBC_TUNABLES already tunes glibc.malloc (then the
// environment's choice stands), with at most `arenas` arenas (0: glibc's own count, for a daemon
// whose many threads allocate on the data path). Call at the start of main, before any thread
// starts. Returns a line for the log saying what it did.
std::string KeepFreedMemoryForReuse(int arenas = 2);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_MALLOC_TUNING_H_
