-- The run's budget ends inside an open transaction, SQLite suspended in its progress handler:
-- the connection's coroutine is resumed with an abort, SQLite fails the statement, rolls back
-- and closes on its own stack (src/app/sqlite/link.rs, `finish`).
CREATE TABLE IF NOT EXISTS t(x INTEGER PRIMARY KEY, v BLOB)
BEGIN
INSERT INTO t(v) VALUES(randomblob(3000))
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) INSERT INTO t(v) SELECT zeroblob(100) FROM c
COMMIT
