#include "common/daemon.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace ringcache {
namespace {

sigset_t TermSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}

}  // namespace

void InitDaemonProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  BlockTerminationSignals();
}

void BlockTerminationSignals() {
  sigset_t s = TermSignals();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int WaitForTerminationSignal() {
  sigset_t s = TermSignals();
  int sig = 0;
  sigwait(&s, &sig);
  return sig;
}

absl::StatusOr<int> ServeMetrics(HttpServer* http, metrics::Registry* registry,
                                 const std::string& listen) {
  http->Handle("/metrics", [registry] {
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", registry->Render()};
  });
  http->Handle("/healthz", [] { return HttpResponse{200, "text/plain", "ok\n"}; });
  std::string host;
  int port = 0;
  RC_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  return http->Start(host, port);
}

absl::Status WriteReadyFile(const std::string& path, const std::map<std::string, int>& ports) {
  if (path.empty()) return absl::OkStatus();
  std::string json = "{";
  for (const auto& [k, v] : ports) absl::StrAppend(&json, "\"", k, "\":", v, ",");
  absl::StrAppend(&json, "\"pid\":", getpid(), "}\n");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!(out << json)) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ready file ", path));
  }
  return absl::OkStatus();
}

}  // namespace ringcache
