CREATE TABLE IF NOT EXISTS note(id INTEGER PRIMARY KEY, body TEXT)
INSERT INTO note(id, body) VALUES({i} + 1, '{value}')
UPDATE note SET body='{value}' WHERE id=({i} * 7) % ({i} + 1) + 1
DELETE FROM note WHERE id={i} - 200
