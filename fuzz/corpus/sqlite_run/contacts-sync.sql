-- A contacts-sync burst as a statement log (one statement a line, the shape of DICL's
-- mobile-traces SQL logs); hand-written for mobistack's tests and examples (asm), not a
-- recorded trace.
CREATE TABLE IF NOT EXISTS raw_contacts (_id INTEGER PRIMARY KEY AUTOINCREMENT, account TEXT, display_name TEXT, version INTEGER, dirty INTEGER)
CREATE TABLE IF NOT EXISTS data (_id INTEGER PRIMARY KEY AUTOINCREMENT, raw_contact_id INTEGER, mimetype TEXT, data1 TEXT)
CREATE INDEX IF NOT EXISTS data_raw ON data (raw_contact_id)
BEGIN
INSERT INTO raw_contacts (account, display_name, version, dirty) VALUES ('a@example.com', 'Ada Lovelace', 1, 0)
INSERT INTO data (raw_contact_id, mimetype, data1) VALUES (last_insert_rowid(), 'vnd.android.cursor.item/phone_v2', '+44 20 7946 0000')
INSERT INTO raw_contacts (account, display_name, version, dirty) VALUES ('a@example.com', 'Alan Turing', 1, 0)
INSERT INTO data (raw_contact_id, mimetype, data1) VALUES (last_insert_rowid(), 'vnd.android.cursor.item/email_v2', 'alan@example.com')
COMMIT
SELECT _id, display_name FROM raw_contacts WHERE dirty = 0
UPDATE raw_contacts SET version = version + 1, dirty = 1 WHERE display_name = 'Ada Lovelace'
SELECT count(*) FROM data
UPDATE raw_contacts SET dirty = 0 WHERE dirty = 1
DELETE FROM data WHERE mimetype = 'vnd.android.cursor.item/email_v2'
