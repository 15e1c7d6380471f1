// What the command files of ringcachectl share (commands.cc: VDIs and the cluster;
// node_commands.cc: cache and data nodes): deadlines, turning a call's result into a Status, and
// the JSON and table pieces more than one command prints.
#ifndef RINGCACHE_TOOLS_CTL_RPC_H_
#define RINGCACHE_TOOLS_CTL_RPC_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/format.h"

namespace ringcache::ctl {

// Fills `ctx` for a unary call: the session's deadline.
void SetDeadline(const AdminSession& s, grpc::ClientContext* ctx);

// Converts the result of a call into a Status. A transport failure while the channel is not
// connected means the gateway was never reached (refused, unresolvable, or silent); any other
// failure is the gateway's own answer and keeps its code and message.
absl::Status FromRpc(const AdminSession& s, const grpc::Status& st);

// The fields of a VDI's geometry, into the open JSON object.
void WriteGeometryJson(const v1::VdiGeometry& g, JsonWriter* j);
// One node as a JSON object (cache nodes with their usage once known).
void WriteNodeJson(const v1::NodeInfo& n, JsonWriter* j);
// "-" for an empty field of a table.
std::string OrDash(const std::string& s);

}  // namespace ringcache::ctl

#endif  // RINGCACHE_TOOLS_CTL_RPC_H_
