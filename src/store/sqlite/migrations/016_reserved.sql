-- Skein schema v16: budgets reserve (DESIGN §13.1). `reserved` holds, on a run with a budget,
-- the expected usage of every attempt in flight under that budget (its own and its
-- descendants'), by `<execution_id>@<attempt>`: {"tokens","cost"} and "probe" when nothing was
-- known of it. Written with the run row, in the transaction that claims the attempt (the run
-- locked), and taken out when the attempt ends. NULL: nothing reserved.
ALTER TABLE runs ADD COLUMN reserved TEXT;
