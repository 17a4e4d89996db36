-- delivery_jobs is a queue: each delivery leaves two dead row versions behind (its claim and its
-- outcome), and every claim reads the due index in order, stepping over the dead entries of earlier
-- deliveries until a vacuum removes them. The default policy (vacuum once a fifth of the table is dead)
-- lets them pile up by the million under a busy hour; here a vacuum (and a re-analyse, for the claim's
-- plan) follows every 10,000 dead versions, whatever the table's size. bench/README.md, Webhooks, has
-- the figures. A vacuum starts at most once per autovacuum_naptime: the embedded server sets 5 s
-- (gateway/runtime/embedded.py); README, What runs where, says what to set on a PostgreSQL of your own.
ALTER TABLE delivery_jobs SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 10000
);
