// The driver of ringcache's fuzz targets (docs/testing.md, "Fuzzing"): a main() for any file
// that defines LLVMFuzzerTestOneInput, so that the same target runs under libFuzzer (clang) and,
// built by the project's own compiler, in CI for a fixed number of iterations.
//
// It reads the seed corpus (files, or directories of files), runs every seed as it is, then
// `--runs` mutated inputs. Iteration i's input is a function of (--seed, i) and the corpus
// alone, so a failure is reproduced by `--seed S --only I CORPUS...`. Mutations: bit flips,
// interesting bytes and integers (0, 1, -1, the extremes, lengths near 2^k), inserted, erased
// and duplicated ranges, splices of two seeds, truncation. No coverage feedback: libFuzzer
// (tests/fuzz/fuzz.sh with clang) is the deeper search; this keeps every parser exercised by
// every CI run.
//
// A crash (a signal, a sanitizer report, a failed check in the target) prints the seed and
// iteration to reproduce it, and writes the input to fuzz-crash-<target>-<seed>-<i> in the
// working directory.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)  // gcc
#define RC_FUZZ_ASAN 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define RC_FUZZ_ASAN 1
#endif
#endif
#if defined(RC_FUZZ_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// What the crash handler writes out (set before each call; plain globals: a signal handler
// reads them).
const char* g_target = "fuzz";
uint64_t g_seed = 0;
long long g_iteration = -1;  // -1: a seed as it is
const std::string* g_input = nullptr;

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Async-signal-safe enough: snprintf into a stack buffer, open/write/close.
void ReportCrash() {
  char name[256];
  std::snprintf(name, sizeof(name), "fuzz-crash-%s-%llu-%lld", g_target,
                static_cast<unsigned long long>(g_seed), g_iteration);
  char line[512];
  const int n = std::snprintf(line, sizeof(line),
                              "\nfuzz: %s crashed on %s %lld (seed %llu); input in ./%s; "
                              "reproduce: %s --seed %llu --only %lld CORPUS...\n",
                              g_target, g_iteration < 0 ? "seed file" : "iteration", g_iteration,
                              static_cast<unsigned long long>(g_seed), name, g_target,
                              static_cast<unsigned long long>(g_seed), g_iteration);
  if (n > 0) WriteAll(2, line, static_cast<size_t>(std::min<int>(n, sizeof(line) - 1)));
  if (g_input != nullptr) {
    const int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      WriteAll(fd, g_input->data(), g_input->size());
      ::close(fd);
    }
  }
}

void OnSignal(int sig) {
  ReportCrash();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::vector<std::string> ReadCorpus(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  auto read = [&out](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  for (const std::string& p : paths) {
    if (!std::filesystem::exists(p)) {
      std::fprintf(stderr, "fuzz: no corpus at %s\n", p.c_str());
      std::exit(2);
    }
    if (std::filesystem::is_directory(p)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());  // a stable order: iterations reproduce
      for (const auto& f : files) read(f);
    } else {
      read(p);
    }
  }
  return out;
}

// Integers that break length and offset arithmetic.
// clang-format off
constexpr uint64_t kInteresting[] = {
    0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0xfff, 0x1000, 0x7fff, 0x8000, 0xffff, 0x10000,
    0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ULL, 0x7fffffffffffffffULL,
    0x8000000000000000ULL, ~0ULL, 4096, 65536, 1u << 20, 32u << 20, 64u << 20, (64u << 20) + 1};
// clang-format on

void Mutate(std::mt19937_64& rng, const std::vector<std::string>& corpus, std::string* s) {
  auto pick = [&rng](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  const int steps = 1 + static_cast<int>(rng() % 6);
  for (int k = 0; k < steps; ++k) {
    switch (rng() % 9) {
      case 0:  // flip a bit
        if (!s->empty()) (*s)[pick(s->size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // a random byte
        if (!s->empty()) (*s)[pick(s->size())] = static_cast<char>(rng());
        break;
      case 2: {  // an interesting integer, 1/2/4/8 bytes, either byte order
        if (s->empty()) break;
        const uint64_t v = kInteresting[pick(std::size(kInteresting))];
        const size_t width = size_t{1} << (rng() % 4);
        const size_t at = pick(s->size());
        const bool big = rng() & 1;
        for (size_t b = 0; b < width && at + b < s->size(); ++b) {
          const size_t shift = 8 * (big ? width - 1 - b : b);
          (*s)[at + b] = static_cast<char>(shift < 64 ? (v >> shift) & 0xff : 0);
        }
        break;
      }
      case 3: {  // insert random bytes
        const size_t n = 1 + pick(16);
        std::string ins(n, '\0');
        for (char& c : ins) c = static_cast<char>(rng());
        s->insert(pick(s->size() + 1), ins);
        break;
      }
      case 4:  // erase a range
        if (!s->empty()) {
          const size_t at = pick(s->size());
          s->erase(at, 1 + pick(std::min<size_t>(64, s->size() - at)));
        }
        break;
      case 5:  // duplicate a range
        if (!s->empty() && s->size() < (1u << 20)) {
          const size_t at = pick(s->size());
          const std::string piece = s->substr(at, 1 + pick(64));
          s->insert(pick(s->size() + 1), piece);
        }
        break;
      case 6:  // splice: the head of this input, the tail of another seed
        if (!corpus.empty()) {
          const std::string& other = corpus[pick(corpus.size())];
          const size_t cut = pick(s->size() + 1);
          const size_t from = pick(other.size() + 1);
          *s = s->substr(0, cut) + other.substr(from);
        }
        break;
      case 7:  // truncate
        if (!s->empty()) s->resize(pick(s->size()));
        break;
      default:  // copy a range over another place
        if (s->size() > 1) {
          const size_t from = pick(s->size()), to = pick(s->size());
          const size_t n = std::min({s->size() - from, s->size() - to, 1 + pick(32)});
          std::memmove(s->data() + to, s->data() + from, n);
        }
        break;
    }
  }
}

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--runs N] [--seed S] [--only I] [--max-len BYTES] CORPUS...\n"
               "Runs every seed of CORPUS (files or directories) and then N mutated inputs\n"
               "(default 10000); --only I runs iteration I alone (I = -1: the seeds).\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long long runs = 10000;
  long long only = -2;  // -2: all
  size_t max_len = 1 << 16;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", argv[0], flag);
        std::exit(Usage(argv[0]));
      }
      return argv[++i];
    };
    if (a == "--runs") {
      runs = std::atoll(value("--runs"));
    } else if (a == "--seed") {
      g_seed = std::strtoull(value("--seed"), nullptr, 10);
    } else if (a == "--only") {
      only = std::atoll(value("--only"));
    } else if (a == "--max-len") {
      max_len = static_cast<size_t>(std::atoll(value("--max-len")));
    } else if (a == "-h" || a == "--help") {
      return Usage(argv[0]);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "%s: unknown flag %s\n", argv[0], a.c_str());
      return Usage(argv[0]);
    } else {
      paths.push_back(a);
    }
  }
  const char* base = std::strrchr(argv[0], '/');
  g_target = base != nullptr ? base + 1 : argv[0];
  const std::vector<std::string> corpus = ReadCorpus(paths);
  if (corpus.empty()) {
    std::fprintf(stderr, "%s: no seed inputs in the corpus given\n", argv[0]);
    return Usage(argv[0]);
  }
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, OnSignal);
#if defined(RC_FUZZ_ASAN)
  __sanitizer_set_death_callback(ReportCrash);
#endif
  std::string input;
  g_input = &input;
  auto run = [&](long long i) {
    g_iteration = i;
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  };
  if (only == -2 || only == -1) {
    for (const std::string& seed : corpus) {
      input = seed;
      run(-1);
    }
  }
  const long long first = only >= 0 ? only : 0;
  const long long end = only >= 0 ? only + 1 : only == -1 ? 0 : runs;
  for (long long i = first; i < end; ++i) {
    // Iteration i's input depends on (seed, i) alone.
    std::seed_seq seq{static_cast<uint32_t>(g_seed), static_cast<uint32_t>(g_seed >> 32),
                      static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32)};
    std::mt19937_64 rng(seq);
    input = corpus[rng() % corpus.size()];
    Mutate(rng, corpus, &input);
    if (input.size() > max_len) input.resize(max_len);
    run(i);
  }
  std::printf("%s: %zu seeds and %lld mutated inputs (seed %llu): no crash\n", g_target,
              corpus.size(), only >= 0 ? 1 : runs, static_cast<unsigned long long>(g_seed));
  return 0;
}
