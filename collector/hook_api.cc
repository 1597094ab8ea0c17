#include "collector/hook_api.h"

#include <string>
#include <string_view>

#include "collector/hook_events.h"
#include "collector/record_codec.h"
#include "collector/recorder.h"

namespace rankscope::collector {
namespace {

std::string_view Text(const char* text, size_t limit) {
  if (text == nullptr) return {};
  std::string_view view(text);
  return view.substr(0, limit);
}

// An args string the rank file can hold: a JSON object (checked by its braces only: the
// hook writes it with json.dumps; readers parse args defensively).
std::string_view Args(const char* args_json) {
  std::string_view args = Text(args_json, kMaxTextBytes / 2);
  if (args.size() < 2 || args.front() != '{' || args.back() != '}') return {};
  return args;
}

template <typename Enum>
Enum EnumOrDefault(int value, Enum last, Enum fallback) {
  return value >= 0 && value <= static_cast<int>(last) ? static_cast<Enum>(value) : fallback;
}

bool Usable(Recorder* recorder, const char* name, int64_t start_ns, int64_t end_ns) {
  return recorder != nullptr && recorder->recording() && name != nullptr && name[0] != '\0' && start_ns > 0 &&
         end_ns >= start_ns;
}

}  // namespace

int HookRange(Recorder* recorder, const char* name, int64_t start_ns, int64_t end_ns, int role,
              const char* args_json) {
  if (!Usable(recorder, name, start_ns, end_ns) || role < 0 || role > static_cast<int>(HookRole::kComm)) return 0;
  const std::string_view name_text = Text(name, 1024);
  std::string text(name_text);
  text += Args(args_json);
  HookRangeBody body;
  body.start_ns = start_ns;
  body.end_ns = end_ns;
  body.name_size = static_cast<uint32_t>(name_text.size());
  body.role = static_cast<HookRole>(role);
  return recorder->RecordHookRange(body, text) ? 1 : 0;
}

int HookCollective(Recorder* recorder, const char* name, const char* comm_name, int64_t start_ns,
                   int64_t end_ns, uint64_t comm_hash, uint64_t sequence, int op, int reduce_op,
                   int datatype, uint64_t bytes, int root, int peer, int comm_rank, int comm_size,
                   const char* args_json) {
  if (!Usable(recorder, name, start_ns, end_ns)) return 0;
  const std::string_view name_text = Text(name, 1024);
  const std::string_view comm_text = Text(comm_name, 1024);
  std::string text(name_text);
  text += comm_text;
  text += Args(args_json);
  HookCollectiveBody body;
  body.start_ns = start_ns;
  body.end_ns = end_ns;
  body.comm_hash = comm_hash;
  body.sequence = sequence;
  body.bytes = bytes;
  body.root = root;
  body.peer = peer;
  body.comm_rank = comm_rank;
  body.comm_size = comm_size < 0 ? 0 : comm_size;
  body.op = EnumOrDefault(op, trace::CollectiveOp::kScatter, trace::CollectiveOp::kUnknown);
  body.reduce_op = EnumOrDefault(reduce_op, trace::ReduceOp::kAvg, trace::ReduceOp::kNone);
  body.datatype = EnumOrDefault(datatype, trace::DataType::kFloat8E5M2, trace::DataType::kUnknown);
  body.name_size = static_cast<uint32_t>(name_text.size());
  body.comm_name_size = static_cast<uint32_t>(comm_text.size());
  return recorder->RecordHookCollective(body, text) ? 1 : 0;
}

int HookCollectiveBegin(Recorder* recorder, const char* name, const char* comm_name, int64_t start_ns,
                        uint64_t comm_hash, uint64_t sequence, int op, uint64_t bytes, int root, int peer,
                        int comm_rank, int comm_size) {
  if (!Usable(recorder, name, start_ns, start_ns)) return 0;
  const std::string_view name_text = Text(name, 1024);
  const std::string_view comm_text = Text(comm_name, 1024);
  std::string text(name_text);
  text += comm_text;
  HookCollectiveBody body;
  body.start_ns = body.end_ns = start_ns;
  body.comm_hash = comm_hash;
  body.sequence = sequence;
  body.bytes = bytes;
  body.root = root;
  body.peer = peer;
  body.comm_rank = comm_rank;
  body.comm_size = comm_size < 0 ? 0 : comm_size;
  body.op = EnumOrDefault(op, trace::CollectiveOp::kScatter, trace::CollectiveOp::kUnknown);
  body.name_size = static_cast<uint32_t>(name_text.size());
  body.comm_name_size = static_cast<uint32_t>(comm_text.size());
  return recorder->RecordHookCollectiveBegin(body, text) ? 1 : 0;
}

int HookMeta(Recorder* recorder, const char* key, const char* value) {
  if (recorder == nullptr || !recorder->recording() || key == nullptr || value == nullptr) return 0;
  const std::string_view key_text(key);
  if (key_text != "backend" && (!key_text.starts_with("pytorch.") || key_text.size() > 128)) return 0;
  recorder->SetMeta(std::string(key_text), std::string(Text(value, 4096)));
  return 1;
}

}  // namespace rankscope::collector
