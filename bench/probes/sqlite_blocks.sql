-- The alternative storage for hot tables: the same ranges packed 4096 to a block (24 bytes
-- each, as the collector's records), one row per block with its lane and time span indexed.
-- time sqlite3 /tmp/blocks.db < bench/probes/sqlite_blocks.sql
PRAGMA page_size=16384; PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-8192;
CREATE TABLE nvtx_range_blocks (id INTEGER PRIMARY KEY, lane INTEGER NOT NULL, first_start_ns INTEGER NOT NULL, last_end_ns INTEGER NOT NULL, count INTEGER NOT NULL, events BLOB NOT NULL);
CREATE INDEX nvtx_range_blocks_lane_time ON nvtx_range_blocks(lane, first_start_ns);
BEGIN;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<977)
INSERT INTO nvtx_range_blocks SELECT NULL, 1 + i % 2, 1760000000000000000 + i*4096*30, 1760000000000000000 + (i+1)*4096*30, 4096, randomblob(4096*24) FROM c;
COMMIT;
