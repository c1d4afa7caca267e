-- Skein schema v16 (PostgreSQL), as SQLite's 016_reserved.sql: budgets reserve (DESIGN §13.1).
-- `reserved` is what attempts in flight under the run's budget are expected to use, by
-- `<execution_id>@<attempt>`; written with the run row in the transaction that claims the
-- attempt, the run locked, so engines that claim under one budget take turns on it.
ALTER TABLE runs ADD COLUMN reserved json;
