#include "common/http_admin.h"

#include <civetweb.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace ringcache::http_admin {
namespace {

struct Checks {
  absl::Mutex mu;
  int next_id ABSL_GUARDED_BY(mu) = 0;
  std::map<int, std::pair<std::string, std::function<std::string()>>> checks ABSL_GUARDED_BY(mu);
};

Checks& Registry() {
  static auto* checks = new Checks;  // never destroyed: checks may outlive static destruction
  return *checks;
}

std::atomic<bool> serving{false};

constexpr const char* kLevels = "trace, debug, info, warn, error, critical, off";

int Reply(mg_connection* conn, int status, const char* reason, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            status, reason, body.size());
  mg_write(conn, body.data(), body.size());
  return status;
}

bool Loopback(const char* addr) {
  const std::string a = addr;
  return a == "::1" || a.rfind("127.", 0) == 0 || a == "::ffff:127.0.0.1";
}

int LogLevelRequest(mg_connection* conn, const mg_request_info* info) {
  const std::string method = info->request_method;
  if (method == "GET") return Reply(conn, 200, "OK", LogLevel() + "\n");
  if (method != "PUT" && method != "POST") {
    return Reply(conn, 405, "Method Not Allowed", "GET or PUT /loglevel\n");
  }
  if (!Loopback(info->remote_addr)) {
    return Reply(conn, 403, "Forbidden",
                 "the log level is changed from the daemon's host (or through its HTTPS front)\n");
  }
  if (info->content_length < 0 || info->content_length > 64) {
    return Reply(conn, 400, "Bad Request", absl::StrCat("the body is one level: ", kLevels, "\n"));
  }
  std::string body(static_cast<size_t>(info->content_length), '\0');
  size_t got = 0;
  while (got < body.size()) {
    const int n = mg_read(conn, body.data() + got, body.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  body.resize(got);
  const std::string before = LogLevel();
  if (absl::Status s = SetLogLevel(std::string(absl::StripAsciiWhitespace(body))); !s.ok()) {
    return Reply(conn, 400, "Bad Request", std::string(s.message()) + "\n");
  }
  spdlog::warn("log level {} -> {} (PUT /loglevel)", before, LogLevel());
  return Reply(conn, 200, "OK", LogLevel() + "\n");
}

}  // namespace

ReadinessCheck::ReadinessCheck(std::string name, std::function<std::string()> not_ready)
    : id_([&] {
        Checks& r = Registry();
        absl::MutexLock l(&r.mu);
        const int id = r.next_id++;
        r.checks[id] = {std::move(name), std::move(not_ready)};
        return id;
      }()) {}

ReadinessCheck::~ReadinessCheck() {
  Checks& r = Registry();
  absl::MutexLock l(&r.mu);
  r.checks.erase(id_);
}

void SetServing(bool s) { serving.store(s); }

std::string NotReady() {
  if (!serving.load()) return "starting or stopping";
  std::vector<std::string> why;
  Checks& r = Registry();
  absl::MutexLock l(&r.mu);
  for (const auto& [id, check] : r.checks) {
    std::string reason = check.second();
    if (!reason.empty()) why.push_back(absl::StrCat(check.first, ": ", reason));
  }
  return absl::StrJoin(why, "; ");
}

absl::Status SetLogLevel(const std::string& level) {
  const std::string name = absl::AsciiStrToLower(level);
  spdlog::level::level_enum l = spdlog::level::from_str(name);
  // from_str answers off for any name it does not know: only "off" itself means off.
  if (l == spdlog::level::off && name != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown log level '", level, "' (", kLevels, ")"));
  }
  spdlog::set_level(l);
  return absl::OkStatus();
}

std::string LogLevel() {
  const auto view = spdlog::level::to_string_view(spdlog::default_logger()->level());
  return std::string(view.data(), view.size());
}

absl::Status ApplyStartLogLevel(const std::optional<std::string>& flag) {
  if (flag.has_value()) return SetLogLevel(*flag);
  const char* env = std::getenv("SPDLOG_LEVEL");
  if (env == nullptr || *env == '\0') return SetLogLevel("info");
  for (absl::string_view part : absl::StrSplit(env, ',')) {
    if (part.find('=') != absl::string_view::npos) continue;  // one logger's: none are named here
    absl::Status s = SetLogLevel(std::string(part));
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("SPDLOG_LEVEL: ", s.message()));
  }
  return absl::OkStatus();
}

int BeginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr) return 0;
  const std::string path = info->local_uri;
  if (path == "/readyz") {
    const std::string why = NotReady();
    return why.empty() ? Reply(conn, 200, "OK", "ready\n")
                       : Reply(conn, 503, "Service Unavailable", "not ready: " + why + "\n");
  }
  if (path == "/loglevel") return LogLevelRequest(conn, info);
  return 0;
}

}  // namespace ringcache::http_admin
