-- The money's and the operators' history is append-only: a row of ledger_entries or operator_actions,
-- once written, is never changed or removed by the product (no code path updates or deletes them: a
-- correction is a new entry). These triggers refuse UPDATE, DELETE and TRUNCATE for every role, so a
-- compromised replica or a mistaken SQL session cannot rewrite history; only a deliberate schema change
-- by the table's owner (ALTER TABLE ... DISABLE TRIGGER) can, and `gateway audit` reports a trigger that
-- is missing or disabled (gateway/storage/operator.py, HISTORY_TRIGGERS).
CREATE FUNCTION refuse_history_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'a correction is a new entry';
END
$$;

CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION refuse_history_change();
CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_change();
CREATE TRIGGER operator_actions_append_only BEFORE UPDATE OR DELETE ON operator_actions
    FOR EACH ROW EXECUTE FUNCTION refuse_history_change();
CREATE TRIGGER operator_actions_no_truncate BEFORE TRUNCATE ON operator_actions
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_change();
