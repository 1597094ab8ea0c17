#include "collector/payload_decoder.h"

#include <nvtx3/nvToolsExtPayload.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace rankscope::collector {
namespace {

constexpr uint64_t kStatic = NVTX_PAYLOAD_SCHEMA_ID_STATIC_START;

template <typename T>
std::span<const std::byte> Bytes(const T& value) {
  return std::as_bytes(std::span(&value, 1));
}

nlohmann::json Decode(NvtxRegistry& registry, const NvtxDomain* domain,
                      std::initializer_list<PayloadPiece> pieces, bool unfinished = false) {
  std::vector<PayloadPiece> list(pieces);
  std::string json = PayloadsToJson(registry, domain, list, unfinished);
  return json.empty() ? nlohmann::json() : nlohmann::json::parse(json);
}

// The layout NCCL 2.28 registers for ncclAllReduce: comm hash, bytes, reduction-op enum.
struct AllReducePayload {
  uint64_t comm;
  size_t bytes;
  int op;
};

TEST(PayloadDecoder, DecodesNcclStyleSchemaWithEnum) {
  NvtxRegistry registry({});
  const NvtxDomain* nccl = registry.CreateDomain("NCCL");
  PayloadEnum ops;
  ops.size = sizeof(int);
  ops.values = {{0, "Sum"}, {1, "Prod"}, {2, "Max"}};
  registry.RegisterEnum(nccl, ops, kStatic + 20);
  PayloadSchema schema;
  schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  schema.entries = {{0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "NCCL communicator ID", 0, 0},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "Message size [bytes]", 0, 8},
                    {0, kStatic + 20, "Reduction operation", 0, 16}};
  EXPECT_EQ(registry.RegisterSchema(nccl, schema, kStatic + 5), kStatic + 5);
  AllReducePayload payload{0xABCDEF0123456789ull, 4096, 2};
  nlohmann::json args = Decode(registry, nccl, {{kStatic + 5, Bytes(payload)}});
  EXPECT_EQ(args["NCCL communicator ID"].get<uint64_t>(), 0xABCDEF0123456789ull);
  EXPECT_EQ(args["Message size [bytes]"], 4096);
  EXPECT_EQ(args["Reduction operation"], "Max");
  EXPECT_EQ(registry.FindSchema(nccl, kStatic + 5)->static_size, sizeof(AllReducePayload));
}

TEST(PayloadDecoder, ResolvesOffsetsByNaturalAlignment) {
  NvtxRegistry registry({});
  const NvtxDomain* domain = registry.CreateDomain("app");
  struct Mixed {
    uint8_t flag;
    double value;
    int16_t small;
    char label[6];
  } payload{1, 2.5, -7, "abc"};
  PayloadSchema schema;
  schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  schema.entries = {{0, NVTX_PAYLOAD_ENTRY_TYPE_UINT8, "flag", 0, 0},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE, "value", 0, 0},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT16, "small", 0, 0},
                    {NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE, NVTX_PAYLOAD_ENTRY_TYPE_CHAR, "label", 6, 0}};
  uint64_t id = registry.RegisterSchema(domain, schema, std::nullopt);
  EXPECT_GE(id, uint64_t{1} << 32);  // dynamic ids when none was asked for
  EXPECT_EQ(registry.FindSchema(domain, id)->entries[1].offset, offsetof(Mixed, value));
  EXPECT_EQ(registry.FindSchema(domain, id)->entries[3].offset, offsetof(Mixed, label));
  nlohmann::json args = Decode(registry, domain, {{id, Bytes(payload)}});
  EXPECT_EQ(args["flag"], 1);
  EXPECT_EQ(args["value"], 2.5);
  EXPECT_EQ(args["small"], -7);
  EXPECT_EQ(args["label"], "abc");
}

TEST(PayloadDecoder, NestedSchemasArraysAndMergedPieces) {
  NvtxRegistry registry({});
  const NvtxDomain* domain = registry.CreateDomain("app");
  PayloadSchema inner;
  inner.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  inner.entries = {{0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "x", 0, 0}, {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "y", 0, 4}};
  registry.RegisterSchema(domain, inner, kStatic + 1);
  PayloadSchema outer;
  outer.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  outer.entries = {{0, kStatic + 1, "point", 0, 0},
                   {NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE, NVTX_PAYLOAD_ENTRY_TYPE_UINT16, "dims", 3, 8}};
  registry.RegisterSchema(domain, outer, kStatic + 2);
  struct {
    int32_t x, y;
    uint16_t dims[3];
  } payload{3, 4, {7, 8, 9}};
  struct {
    uint64_t step;
  } second{12};
  PayloadSchema step;
  step.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  step.entries = {{0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "step", 0, 0}};
  registry.RegisterSchema(domain, step, kStatic + 3);
  nlohmann::json args = Decode(registry, domain, {{kStatic + 2, Bytes(payload)}, {kStatic + 3, Bytes(second)}});
  EXPECT_EQ(args["point"]["x"], 3);
  EXPECT_EQ(args["point"]["y"], 4);
  EXPECT_EQ(args["dims"], nlohmann::json({7, 8, 9}));
  EXPECT_EQ(args["step"], 12);
}

TEST(PayloadDecoder, SaysWhatItCannotRead) {
  NvtxRegistry registry({});
  const NvtxDomain* domain = registry.CreateDomain("app");
  PayloadSchema schema;
  schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  schema.entries = {{NVTX_PAYLOAD_ENTRY_FLAG_POINTER, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "pointer", 0, 0},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "beyond the bytes", 0, 64}};
  registry.RegisterSchema(domain, schema, kStatic + 9);
  uint64_t small = 5;
  nlohmann::json args = Decode(registry, domain, {{kStatic + 9, Bytes(small)}, {kStatic + 77, Bytes(small)}});
  EXPECT_TRUE(args["pointer"].is_null());
  EXPECT_TRUE(args["beyond the bytes"].is_null());
  EXPECT_TRUE(args["<schema 16777293>"].is_null());
  EXPECT_TRUE(args.contains("<schema 16777293>"));
}

TEST(PayloadDecoder, SchemasBelongToTheirDomain) {
  NvtxRegistry registry({});
  const NvtxDomain* a = registry.CreateDomain("a");
  const NvtxDomain* b = registry.CreateDomain("b");
  PayloadSchema schema;
  schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  schema.entries = {{0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "v", 0, 0}};
  registry.RegisterSchema(a, schema, kStatic + 1);
  EXPECT_NE(registry.FindSchema(a, kStatic + 1), nullptr);
  EXPECT_EQ(registry.FindSchema(b, kStatic + 1), nullptr);
}

TEST(PayloadDecoder, EmptyUnlessSomethingToSay) {
  NvtxRegistry registry({});
  EXPECT_EQ(PayloadsToJson(registry, registry.DefaultDomain(), {}, false), "");
  EXPECT_EQ(PayloadsToJson(registry, registry.DefaultDomain(), {}, true),
            R"({"rankscope.unfinished":true})");
}

TEST(PayloadDecoder, ReadsTheRankscopeCollectiveConvention) {
  NvtxRegistry registry({});
  const NvtxDomain* domain = registry.CreateDomain("rankscope");
  struct Fields {
    uint64_t comm, sequence, bytes;
    int64_t root, comm_size;
  };
  PayloadSchema schema;
  schema.name = kCollectiveSchemaName;
  schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  schema.entries = {{0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "comm", 0, offsetof(Fields, comm)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "sequence", 0, offsetof(Fields, sequence)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bytes", 0, offsetof(Fields, bytes)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "root", 0, offsetof(Fields, root)},
                    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_size", 0, offsetof(Fields, comm_size)}};
  const uint64_t convention = registry.RegisterSchema(domain, schema, kStatic + 1);
  schema.name = "rankscope allreduce";
  const uint64_t other = registry.RegisterSchema(domain, schema, kStatic + 2);
  schema.name = kCollectiveSchemaName;
  schema.entries.erase(schema.entries.begin() + 1);  // no sequence
  const uint64_t unnumbered = registry.RegisterSchema(domain, schema, kStatic + 3);

  const Fields fields{0xCBF29CE484222325, 41, 1 << 20, 3, 8};
  std::optional<CollectivePayload> payload = ReadCollectivePayload(
      registry, domain, std::vector<PayloadPiece>{{other, Bytes(fields)}, {convention, Bytes(fields)}});
  ASSERT_TRUE(payload.has_value());
  EXPECT_EQ(payload->comm_hash, 0xCBF29CE484222325);  // every bit of a uint64 id
  EXPECT_EQ(payload->sequence, 41u);
  EXPECT_EQ(payload->bytes, 1u << 20);
  EXPECT_EQ(payload->root, 3);
  EXPECT_EQ(payload->peer, -1);       // absent fields keep their "not applicable"
  EXPECT_EQ(payload->comm_rank, -1);  // and "unknown"
  EXPECT_EQ(payload->comm_size, 8);

  // Numbers that do not fit read as unknown rather than as another rank.
  const Fields odd{1, 2, 0, int64_t{1} << 40, -4};
  payload = ReadCollectivePayload(registry, domain, std::vector<PayloadPiece>{{convention, Bytes(odd)}});
  ASSERT_TRUE(payload.has_value());
  EXPECT_EQ(payload->root, -1);
  EXPECT_EQ(payload->comm_size, 0);

  EXPECT_FALSE(ReadCollectivePayload(registry, domain, std::vector<PayloadPiece>{{other, Bytes(fields)}}));
  EXPECT_FALSE(ReadCollectivePayload(registry, domain, std::vector<PayloadPiece>{{unnumbered, Bytes(fields)}}));
  EXPECT_FALSE(ReadCollectivePayload(registry, registry.DefaultDomain(),  // schemas belong to their domain
                                     std::vector<PayloadPiece>{{convention, Bytes(fields)}}));
  EXPECT_FALSE(ReadCollectivePayload(registry, domain, {}));
}

TEST(NvtxRegistry, DomainsFollowTheTraceSelection) {
  NvtxRegistry registry(TraceSelection{.nvtx = true, .cuda = false, .nccl = false});
  EXPECT_FALSE(registry.CreateDomain("NCCL")->enabled);
  EXPECT_TRUE(registry.CreateDomain("app")->enabled);
  EXPECT_EQ(registry.CreateDomain("app"), registry.CreateDomain("app"));
  const NvtxDomain* app = registry.CreateDomain("app");
  EXPECT_EQ(registry.RegisterString(app, "x"), registry.RegisterString(app, "x"));
  EXPECT_NE(registry.RegisterString(app, "x"), registry.RegisterString(registry.DefaultDomain(), "x"));
}

}  // namespace
}  // namespace rankscope::collector
