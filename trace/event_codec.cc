#include "trace/event_codec.h"

#include <cstdint>

namespace rankscope::trace::codec {
namespace {

// Walks INSERT parameters left to right, so each Bind lists fields once, in column order.
class Out {
 public:
  explicit Out(sql::Statement& stmt) : stmt_(stmt) {}
  Out& Int(int64_t v) { stmt_.BindInt(next_++, v); return *this; }
  Out& Uint(uint64_t v) { stmt_.BindUint(next_++, v); return *this; }
  Out& Real(double v) { stmt_.BindReal(next_++, v); return *this; }
  template <typename E> Out& Enum(E v) { return Int(static_cast<int64_t>(v)); }

 private:
  sql::Statement& stmt_;
  int next_ = 1;
};

// Walks SELECT result columns left to right.
class In {
 public:
  explicit In(const sql::Statement& stmt) : stmt_(stmt) {}
  int64_t Int() { return stmt_.ColumnInt(next_++); }
  uint64_t Uint() { return stmt_.ColumnUint(next_++); }
  uint32_t U32() { return static_cast<uint32_t>(Int()); }
  int32_t I32() { return static_cast<int32_t>(Int()); }
  double Real() { return stmt_.ColumnReal(next_++); }
  template <typename E> E Enum() { return static_cast<E>(Int()); }
  // A lane or string id: one that does not fit 32 bits can neither alias another id nor
  // size anything.
  uint32_t Id() { return IdFromColumn(Int()); }

 private:
  const sql::Statement& stmt_;
  int next_ = 0;
};

Out& PutCommon(Out& out, const EventCommon& e) {
  return out.Int(e.lane).Int(e.start_ns).Int(e.end_ns).Int(e.name).Uint(e.correlation_id);
}

void GetCommon(In& in, EventCommon* e) {
  e->lane = in.Id();
  e->start_ns = in.Int();
  e->end_ns = in.Int();
  e->name = in.Id();
  e->correlation_id = in.Uint();
}

Out& PutNvtx(Out& out, const NvtxAttributes& a) {
  return out.Int(a.domain).Int(a.category).Int(a.color).Enum(a.payload.kind)
      .Int(a.payload.int_value).Real(a.payload.real_value).Int(a.args);
}

void GetNvtx(In& in, NvtxAttributes* a) {
  a->domain = in.Id();
  a->category = in.U32();
  a->color = in.U32();
  a->payload.kind = in.Enum<PayloadKind>();
  a->payload.int_value = in.Int();
  a->payload.real_value = in.Real();
  a->args = in.Id();
}

}  // namespace

void Bind(sql::Statement& stmt, const KernelEvent& e) {
  Out out(stmt);
  PutCommon(out, e).Int(e.grid.x).Int(e.grid.y).Int(e.grid.z).Int(e.block.x).Int(e.block.y)
      .Int(e.block.z).Int(e.registers_per_thread).Int(e.static_shared_bytes)
      .Int(e.dynamic_shared_bytes);
}
void Read(const sql::Statement& stmt, KernelEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  e->grid = {in.U32(), in.U32(), in.U32()};
  e->block = {in.U32(), in.U32(), in.U32()};
  e->registers_per_thread = in.U32();
  e->static_shared_bytes = in.U32();
  e->dynamic_shared_bytes = in.U32();
}

void Bind(sql::Statement& stmt, const MemcpyEvent& e) {
  Out out(stmt);
  PutCommon(out, e).Uint(e.bytes).Enum(e.copy_kind).Enum(e.src_kind).Enum(e.dst_kind)
      .Int(e.src_device).Int(e.dst_device);
}
void Read(const sql::Statement& stmt, MemcpyEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  e->bytes = in.Uint();
  e->copy_kind = in.Enum<CopyKind>();
  e->src_kind = in.Enum<MemoryKind>();
  e->dst_kind = in.Enum<MemoryKind>();
  e->src_device = in.I32();
  e->dst_device = in.I32();
}

void Bind(sql::Statement& stmt, const MemsetEvent& e) {
  Out out(stmt);
  PutCommon(out, e).Uint(e.bytes).Int(e.value).Enum(e.memory_kind);
}
void Read(const sql::Statement& stmt, MemsetEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  e->bytes = in.Uint();
  e->value = in.U32();
  e->memory_kind = in.Enum<MemoryKind>();
}

void Bind(sql::Statement& stmt, const ApiCallEvent& e) {
  Out out(stmt);
  PutCommon(out, e).Enum(e.domain).Int(e.callback_id).Int(e.return_code).Uint(e.external_id);
}
void Read(const sql::Statement& stmt, ApiCallEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  e->domain = in.Enum<ApiDomain>();
  e->callback_id = in.U32();
  e->return_code = in.I32();
  e->external_id = in.Uint();
}

void Bind(sql::Statement& stmt, const SyncEvent& e) {
  Out out(stmt);
  PutCommon(out, e).Enum(e.sync_kind).Int(e.context).Uint(e.stream).Uint(e.cuda_event_id);
}
void Read(const sql::Statement& stmt, SyncEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  e->sync_kind = in.Enum<SyncKind>();
  e->context = in.U32();
  e->stream = in.Uint();
  e->cuda_event_id = in.Uint();
}

void Bind(sql::Statement& stmt, const NvtxRangeEvent& e) {
  Out out(stmt);
  PutNvtx(PutCommon(out, e), e).Enum(e.style).Int(e.end_lane);
}
void Read(const sql::Statement& stmt, NvtxRangeEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  GetNvtx(in, e);
  e->style = in.Enum<NvtxRangeStyle>();
  e->end_lane = in.Id();
}

void Bind(sql::Statement& stmt, const NvtxMarkEvent& e) {
  Out out(stmt);
  PutNvtx(PutCommon(out, e), e);
}
void Read(const sql::Statement& stmt, NvtxMarkEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  GetNvtx(in, e);
}

void Bind(sql::Statement& stmt, const CollectiveEvent& e) {
  Out out(stmt);
  PutCommon(out, e).Uint(e.comm_hash).Uint(e.sequence).Enum(e.op).Enum(e.reduce_op)
      .Enum(e.datatype).Uint(e.bytes).Int(e.root).Int(e.peer).Int(e.comm_rank)
      .Int(e.comm_size).Int(e.channels).Int(e.algorithm).Int(e.protocol);
}
void Read(const sql::Statement& stmt, CollectiveEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  e->comm_hash = in.Uint();
  e->sequence = in.Uint();
  e->op = in.Enum<CollectiveOp>();
  e->reduce_op = in.Enum<ReduceOp>();
  e->datatype = in.Enum<DataType>();
  e->bytes = in.Uint();
  e->root = in.I32();
  e->peer = in.I32();
  e->comm_rank = in.I32();
  e->comm_size = in.I32();
  e->channels = in.U32();
  e->algorithm = in.Id();
  e->protocol = in.Id();
}

void Bind(sql::Statement& stmt, const CounterSample& e) {
  Out out(stmt);
  out.Int(e.lane).Int(e.ts_ns).Real(e.value);
}
void Read(const sql::Statement& stmt, CounterSample* e) {
  In in(stmt);
  e->lane = in.Id();
  e->ts_ns = in.Int();
  e->value = in.Real();
}

void Bind(sql::Statement& stmt, const CollectivePartEvent& e) {
  Out out(stmt);
  PutCommon(out, e).Uint(e.comm_hash).Uint(e.sequence).Enum(e.part_kind).Int(e.channel)
      .Int(e.peer).Int(e.step).Uint(e.bytes);
}
void Read(const sql::Statement& stmt, CollectivePartEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  e->comm_hash = in.Uint();
  e->sequence = in.Uint();
  e->part_kind = in.Enum<CollectivePartKind>();
  e->channel = in.I32();
  e->peer = in.I32();
  e->step = in.I32();
  e->bytes = in.Uint();
}

void Bind(sql::Statement& stmt, const OverheadEvent& e) {
  Out out(stmt);
  PutCommon(out, e).Enum(e.overhead_kind);
}
void Read(const sql::Statement& stmt, OverheadEvent* e) {
  In in(stmt);
  GetCommon(in, e);
  e->overhead_kind = in.Enum<OverheadKind>();
}

}  // namespace rankscope::trace::codec
