-- The node's slot when a send's hold was taken, read before anything was sent: a landing at an
-- earlier slot happened before this send (the same transaction landed by an earlier send, whose
-- record retention may have deleted, or by another route), so the send is settled at that landing's
-- status and charged nothing (gateway/storage/sends.py, landed_before). NULL for sends held before
-- this migration: any landing found is theirs, as before.
ALTER TABLE sends ADD COLUMN hold_slot BIGINT CHECK (hold_slot >= 0);
