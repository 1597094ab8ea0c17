-- A hand-made Nsight Systems export (schema 3.25, the tables and columns `nsys export --type sqlite`
-- writes, reduced to those the importer reads) of a 2-process DDP step on one host:
--   pid 500 (rank 0 by process order) and pid 600 (rank 1), one GPU each, one gemm and one NCCL
--   all-reduce kernel per process, a copy, a set, runtime calls, a sync, a CUPTI overhead
--   record, NVTX step ranges in domain 'trainer' and NCCL's own range and mark;
--   pid 700, a data-loader worker with NVTX only, which is no rank;
--   and one kernel of pid 600 that ends before it starts, which the importer skips.
-- Session clock: ts; wall clock = utcEpochNs + (ts - systemClockNs) = 1700000000000000000 + ts - 1000000.
-- Global ids: globalPid = 2^48 + pid * 2^24 (VM 1), globalTid = globalPid + tid.
PRAGMA page_size = 4096;
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', '2026.2.1.210'), ('EXPORT_SCHEMA_VERSION', '3.25.0');
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES
  (1, 'void gemm_kernel<float>(float const*, float*)'), (2, 'gemm_kernel'),
  (3, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)'),
  (4, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'),
  (10, 'cudaLaunchKernel_v7000'), (11, 'cudaMemcpyAsync_v3020'), (12, 'cudaStreamSynchronize_v3020'),
  (20, 'forward'), (30, 'pt_main_thread'), (31, 'pt_data_worker');
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
INSERT INTO PROCESSES VALUES (281483365318656, 500, 'python3'), (281485043040256, 600, 'python3'),
  (281486720761856, 700, 'python3');
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
INSERT INTO ThreadNames VALUES (30, 0, 281483365319156), (30, 0, 281485043040856), (31, 0, 281486720762556);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '', 1000000);
CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL,
  nameEnum INTEGER NOT NULL, value TEXT NOT NULL);
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (281474976710656, 'Local', 'Hostname', 1, 'gpu-node-3');
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
  (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, "end" INTEGER NOT NULL, deviceId INTEGER,
  contextId INTEGER, greenContextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER, shortName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER,
  blockY INTEGER, blockZ INTEGER, registersPerThread INTEGER, staticSharedMemory INTEGER,
  dynamicSharedMemory INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
  (1100000, 1400000, 0, 1, 0, 7, 11, 281483365318656, 1, 2, 64, 2, 1, 256, 1, 1, 64, 16384, 0),
  (1410000, 1800000, 0, 1, 0, 20, 12, 281483365318656, 3, 4, 2, 1, 1, 512, 1, 1, 96, 0, 4096),
  (1100000, 1550000, 1, 1, 0, 7, 11, 281485043040256, 1, 2, 64, 2, 1, 256, 1, 1, 64, 16384, 0),
  (1560000, 1800000, 1, 1, 0, 20, 12, 281485043040256, 3, 4, 2, 1, 1, 512, 1, 1, 96, 0, 4096),
  (1900000, 1850000, 1, 1, 0, 7, 13, 281485043040256, 1, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, "end" INTEGER NOT NULL, deviceId INTEGER,
  contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER,
  srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, dstDeviceId INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES
  (1040000, 1090000, 0, 1, 7, 10, 281483365318656, 1048576, 1, 0, 2, NULL, NULL),
  (1040000, 1090000, 1, 1, 7, 10, 281485043040256, 1048576, 1, 0, 2, NULL, NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, "end" INTEGER NOT NULL, deviceId INTEGER,
  contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER,
  memKind INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (1092000, 1096000, 0, 1, 7, 9, 281483365318656, 0, 4096, 2);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, "end" INTEGER, eventClass INTEGER, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER, returnValue INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
  (1012000, 1018000, 0, 281483365319156, 10, 11, 0), (1020000, 1030000, 0, 281483365319156, 11, 10, 0),
  (1065000, 1073000, 0, 281483365319156, 12, 10, 0), (1810000, 1825500, 0, 281483365319156, 13, 12, 0),
  (1012000, 1018000, 0, 281485043040856, 10, 11, 0), (1020000, 1030000, 0, 281485043040856, 11, 10, 0),
  (1065000, 1073000, 0, 281485043040856, 12, 10, 0);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, "end" INTEGER NOT NULL, deviceId INTEGER,
  contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, deprecatedSyncType INTEGER,
  syncType INTEGER, eventId INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES
  (1810000, 1825500, 0, 1, 20, 13, 281483365318656, NULL, 3, 4294967295);
CREATE TABLE CUPTI_ACTIVITY_KIND_OVERHEAD (start INTEGER NOT NULL, "end" INTEGER NOT NULL, eventClass INTEGER,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER, overheadType INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_OVERHEAD VALUES (1000010, 1000020, 0, 281485043040856, 0, NULL, 3);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, "end" INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
  int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
-- Domain names (eventType 75) and a category name (33) per process, then ranges (59) and a mark (34).
INSERT INTO NVTX_EVENTS (start, "end", eventType, category, text, globalTid, domainId) VALUES
  (999000, NULL, 75, NULL, 'trainer', 281483365319156, 5), (999000, NULL, 75, NULL, 'NCCL', 281483365319156, 6),
  (999000, NULL, 75, NULL, 'trainer', 281485043040856, 5), (999000, NULL, 75, NULL, 'NCCL', 281485043040856, 6),
  (999100, NULL, 33, 1, 'compute', 281483365319156, 5), (999100, NULL, 33, 1, 'compute', 281485043040856, 5);
INSERT INTO NVTX_EVENTS (start, "end", eventType, category, color, text, globalTid, domainId, int64Value) VALUES
  (1000000, 2000000, 59, NULL, 4278255360, 'train_step', 281483365319156, 5, 1),
  (1000000, 2000000, 59, NULL, 4278255360, 'train_step', 281485043040856, 5, 1);
INSERT INTO NVTX_EVENTS (start, "end", eventType, category, textId, globalTid, domainId, jsonText) VALUES
  (1005000, 1050000, 59, 1, 20, 281483365319156, 5, '{"batch": 32}'),
  (1005000, 1050000, 59, 1, 20, 281485043040856, 5, '{"batch": 32}');
INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) VALUES
  (1060000, 1080000, 59, 'ncclAllReduce', 281483365319156, 6), (1060000, 1080000, 59, 'ncclAllReduce', 281485043040856, 6),
  (1200000, 1300000, 59, 'load batch', 281486720762556, 0);
INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId, uint32Value) VALUES
  (1900000, 34, 'checkpoint', 281483365319156, 5, 7);
