-- Skein schema v11: usage and budgets (DESIGN §12). `usage` is what the run's attempts reported,
-- its own and its descendants' ({"tokens_in","tokens_out","cost"}): a report is added to the
-- run and every run above it in the transaction that applies it, so reading a run's usage, or
-- checking a budget, is a read of its row. `budget` ({"max_tokens","max_cost"}, or NULL) is the
-- run's own, set once when the run starts.
ALTER TABLE runs ADD COLUMN usage TEXT NOT NULL DEFAULT '{"tokens_in":0,"tokens_out":0,"cost":0}';
ALTER TABLE runs ADD COLUMN budget TEXT;
