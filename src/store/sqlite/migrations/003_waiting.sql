-- Skein schema v3: the WAITING state (sleep, wait_event; DESIGN §3, §11). A waiting visit's due
-- time is its lease_expires_at, as a review's timeout is: the sweep and the wake-up timer find
-- it through this index, so a parked visit costs the engine nothing until then.
CREATE INDEX visits_waiting ON visits (lease_expires_at) WHERE state = 'WAITING';
