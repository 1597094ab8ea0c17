-- What bounds the collector's stored rate: 2M nvtx_ranges rows inserted one per row, as the rank
-- file stores them (same pragmas as the injected writer, its one index). Compare with
-- sqlite_blocks.sql: time sqlite3 /tmp/rows.db < bench/probes/sqlite_rows.sql
PRAGMA page_size=16384; PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-8192;
CREATE TABLE nvtx_ranges (id INTEGER PRIMARY KEY, lane INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, name INTEGER NOT NULL, correlation_id INTEGER NOT NULL, domain INTEGER NOT NULL, category INTEGER NOT NULL, color INTEGER NOT NULL, payload_kind INTEGER NOT NULL, payload_int INTEGER NOT NULL, payload_real REAL NOT NULL, args INTEGER NOT NULL, style INTEGER NOT NULL, end_lane INTEGER NOT NULL);
CREATE INDEX nvtx_ranges_lane_time ON nvtx_ranges(lane, start_ns);
BEGIN;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<2000000)
INSERT INTO nvtx_ranges SELECT NULL, 1 + i % 2, 1760000000000000000 + i*30, 1760000000000000000 + i*30 + 20, 5, 0, 0, 0, 0, 0, 0, 0.0, 0, 1, 0 FROM c;
COMMIT;
