-- Skein schema v23: an agent node's threads (DESIGN §14.2). A visit that continues a thread
-- records the step `thread:<key>` first (the messages it adds to the thread); the thread's
-- history is the steps of the visits that recorded that name before it. This index finds them
-- by name; partial, so no other step pays for it.
CREATE INDEX steps_by_thread ON steps (name, seq) WHERE name LIKE 'thread:%';
