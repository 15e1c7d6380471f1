// Binary trace reader and writer. See binary_format.h for the layout.
#include "tools/sim/binary_format.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringcache::sim {
namespace {

constexpr size_t kReadBufferRecords = 1 << 17;  // 3 MiB of records per refill
constexpr uint32_t kWriteFlag = uint32_t{1} << 31;

inline uint64_t LoadU64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) v = __builtin_bswap64(v);
  return v;
}
inline uint32_t LoadU32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) v = __builtin_bswap32(v);
  return v;
}
inline uint16_t LoadU16(const unsigned char* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline void StoreU64(unsigned char* p, uint64_t v) {
  if constexpr (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}
inline void StoreU32(unsigned char* p, uint32_t v) {
  if constexpr (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}

absl::Status WriteErr(const std::string& path) {
  return absl::InternalError(absl::StrCat("write ", path, ": ", std::strerror(errno)));
}

}  // namespace

bool IsBinaryTrace(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ByteSource>> src = ByteSource::Open(path);
  if (!src.ok()) return false;
  char magic[8];
  absl::StatusOr<size_t> n = (*src)->ReadFull(magic, 8);
  return n.ok() && *n == 8 && std::memcmp(magic, kBinaryMagic, 8) == 0;
}

BinaryTraceReader::BinaryTraceReader(std::unique_ptr<ByteSource> src)
    : src_(std::move(src)), buf_(kReadBufferRecords * kBinaryRecordSize) {}

absl::StatusOr<std::unique_ptr<BinaryTraceReader>> BinaryTraceReader::Open(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<ByteSource>> src = ByteSource::Open(path);
  if (!src.ok()) return src.status();
  unsigned char h[kBinaryHeaderSize];
  absl::StatusOr<size_t> n = (*src)->ReadFull(h, sizeof(h));
  if (!n.ok()) return n.status();
  if (*n != sizeof(h) || std::memcmp(h, kBinaryMagic, 8) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a ringcache-sim binary trace (bad magic or short header)"));
  }
  uint32_t version = LoadU32(h + 8);
  uint32_t record_size = LoadU32(h + 12);
  if (version != kBinaryVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": binary trace version ", version, ", this build reads version ",
                     kBinaryVersion));
  }
  if (record_size != kBinaryRecordSize) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": record size ", record_size, ", expected ", kBinaryRecordSize));
  }
  auto reader = std::unique_ptr<BinaryTraceReader>(new BinaryTraceReader(*std::move(src)));
  reader->record_count_ = LoadU64(h + 16);
  reader->names_offset_ = LoadU64(h + 24);
  reader->unit_bytes_ = LoadU32(h + 32);
  reader->remaining_ = reader->record_count_;
  if (reader->record_count_ != kUnknownCount && reader->names_offset_ != 0 &&
      reader->names_offset_ !=
          kBinaryHeaderSize + reader->record_count_ * uint64_t{kBinaryRecordSize}) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": name table offset ", reader->names_offset_,
                     " does not follow the ", reader->record_count_, " records"));
  }
  return reader;
}

absl::StatusOr<size_t> BinaryTraceReader::Read(absl::Span<Request> out) {
  size_t n = 0;
  while (n < out.size() && !done_) {
    if (buf_end_ - buf_begin_ < kBinaryRecordSize) {
      // Refill: keep the partial record, read up to the remaining record bytes.
      size_t tail = buf_end_ - buf_begin_;
      std::memmove(buf_.data(), buf_.data() + buf_begin_, tail);
      buf_begin_ = 0;
      buf_end_ = tail;
      size_t want = buf_.size() - tail;
      if (remaining_ != kUnknownCount) {
        uint64_t left = remaining_ * kBinaryRecordSize - tail;
        if (left < want) want = static_cast<size_t>(left);
      }
      absl::StatusOr<size_t> got = want > 0 ? src_->ReadFull(buf_.data() + tail, want)
                                            : absl::StatusOr<size_t>(0);
      if (!got.ok()) return got.status();
      buf_end_ += *got;
      if (buf_end_ < kBinaryRecordSize) {
        if (remaining_ != kUnknownCount && remaining_ > 0) {
          return absl::DataLossError(absl::StrCat(
              src_->path(), ": truncated: header promises ", record_count_, " records, file has ",
              stats_.requests));
        }
        if (buf_end_ != 0) {
          return absl::DataLossError(
              absl::StrCat(src_->path(), ": truncated record at the end of the file"));
        }
        done_ = true;
        if (remaining_ == 0 && names_offset_ != 0) {
          absl::Status s = ReadNames();
          if (!s.ok()) return s;
        }
        break;
      }
    }
    size_t avail = (buf_end_ - buf_begin_) / kBinaryRecordSize;
    size_t take = out.size() - n < avail ? out.size() - n : avail;
    const unsigned char* p = buf_.data() + buf_begin_;
    for (size_t i = 0; i < take; ++i, p += kBinaryRecordSize) {
      Request& r = out[n + i];
      r.time_us = LoadU64(p);
      r.offset = LoadU64(p + 8);
      uint32_t lo = LoadU32(p + 16);
      r.length = lo & ~kWriteFlag;
      r.op = (lo & kWriteFlag) ? Op::kWrite : Op::kRead;
      r.vdi = LoadU32(p + 20);
      if (r.length == 0) {
        return absl::DataLossError(absl::StrCat(src_->path(), ": record ",
                                                stats_.requests + i, " has length 0"));
      }
    }
    buf_begin_ += take * kBinaryRecordSize;
    n += take;
    stats_.requests += take;
    if (remaining_ != kUnknownCount) remaining_ -= take;
  }
  return n;
}

absl::Status BinaryTraceReader::ReadNames() {
  unsigned char c[4];
  absl::StatusOr<size_t> got = src_->ReadFull(c, 4);
  if (!got.ok()) return got.status();
  if (*got != 4) return absl::DataLossError(absl::StrCat(src_->path(), ": name table missing"));
  uint32_t count = LoadU32(c);
  if (count > (1u << 24)) {
    return absl::DataLossError(absl::StrCat(src_->path(), ": name table too large"));
  }
  for (uint32_t i = 0; i < count; ++i) {
    unsigned char e[6];
    got = src_->ReadFull(e, 6);
    if (!got.ok()) return got.status();
    if (*got != 6) return absl::DataLossError(absl::StrCat(src_->path(), ": name table cut"));
    uint32_t vdi = LoadU32(e);
    uint16_t len = LoadU16(e + 4);
    std::string name(len, '\0');
    got = src_->ReadFull(name.data(), len);
    if (!got.ok()) return got.status();
    if (*got != len) return absl::DataLossError(absl::StrCat(src_->path(), ": name table cut"));
    if (vdi > (1u << 24)) continue;  // ignore absurd ids rather than allocate for them
    if (names_.size() <= vdi) names_.resize(vdi + 1);
    names_[vdi] = std::move(name);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BinaryTraceWriter>> BinaryTraceWriter::Create(
    const std::string& path, uint32_t unit_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat("create ", path, ": ", std::strerror(errno)));
  }
  auto w = std::unique_ptr<BinaryTraceWriter>(new BinaryTraceWriter(path, f));
  unsigned char h[kBinaryHeaderSize] = {};
  std::memcpy(h, kBinaryMagic, 8);
  StoreU32(h + 8, kBinaryVersion);
  StoreU32(h + 12, kBinaryRecordSize);
  StoreU64(h + 16, kUnknownCount);
  StoreU64(h + 24, 0);
  StoreU32(h + 32, unit_bytes);
  if (std::fwrite(h, 1, sizeof(h), f) != sizeof(h)) return WriteErr(path);
  w->buf_.reserve(kReadBufferRecords * kBinaryRecordSize);
  return w;
}

BinaryTraceWriter::~BinaryTraceWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

absl::Status BinaryTraceWriter::Flush() {
  if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) {
    return WriteErr(path_);
  }
  buf_.clear();
  return absl::OkStatus();
}

absl::Status BinaryTraceWriter::Append(const Request& r) {
  if (r.length == 0 || r.length >= kWriteFlag) {
    return absl::InvalidArgumentError(
        absl::StrCat("request length ", r.length, " does not fit the binary format"));
  }
  size_t at = buf_.size();
  buf_.resize(at + kBinaryRecordSize);
  unsigned char* p = buf_.data() + at;
  StoreU64(p, r.time_us);
  StoreU64(p + 8, r.offset);
  StoreU32(p + 16, r.length | (r.op == Op::kWrite ? kWriteFlag : 0));
  StoreU32(p + 20, r.vdi);
  ++count_;
  if (buf_.size() >= kReadBufferRecords * kBinaryRecordSize) return Flush();
  return absl::OkStatus();
}

absl::Status BinaryTraceWriter::Close(const std::vector<std::string>& vdi_names) {
  if (f_ == nullptr) return absl::FailedPreconditionError("writer already closed");
  absl::Status s = Flush();
  if (!s.ok()) return s;
  uint64_t names_offset = kBinaryHeaderSize + count_ * uint64_t{kBinaryRecordSize};
  uint32_t named = 0;
  for (const std::string& n : vdi_names) named += n.empty() ? 0 : 1;
  if (named > 0) {
    unsigned char c[4];
    StoreU32(c, named);
    buf_.insert(buf_.end(), c, c + 4);
    for (uint32_t vdi = 0; vdi < vdi_names.size(); ++vdi) {
      const std::string& n = vdi_names[vdi];
      if (n.empty()) continue;
      size_t len = n.size() > 0xffff ? 0xffff : n.size();
      unsigned char e[6];
      StoreU32(e, vdi);
      e[4] = static_cast<unsigned char>(len & 0xff);
      e[5] = static_cast<unsigned char>(len >> 8);
      buf_.insert(buf_.end(), e, e + 6);
      buf_.insert(buf_.end(), n.begin(), n.begin() + len);
    }
    s = Flush();
    if (!s.ok()) return s;
  }
  unsigned char patch[16];
  StoreU64(patch, count_);
  StoreU64(patch + 8, named > 0 ? names_offset : 0);
  if (std::fseek(f_, 16, SEEK_SET) != 0 || std::fwrite(patch, 1, 16, f_) != 16) {
    return WriteErr(path_);
  }
  int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) return WriteErr(path_);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> WriteBinaryTrace(RequestSource& src, const std::string& path,
                                          uint32_t unit_bytes) {
  absl::StatusOr<std::unique_ptr<BinaryTraceWriter>> w =
      BinaryTraceWriter::Create(path, unit_bytes);
  if (!w.ok()) return w.status();
  std::vector<Request> batch(4096);
  while (true) {
    absl::StatusOr<size_t> n = src.Read(absl::MakeSpan(batch));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    for (size_t i = 0; i < *n; ++i) {
      absl::Status s = (*w)->Append(batch[i]);
      if (!s.ok()) return s;
    }
  }
  absl::Status s = (*w)->Close(src.VdiNames());
  if (!s.ok()) return s;
  return (*w)->count();
}

}  // namespace ringcache::sim
