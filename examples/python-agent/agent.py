#!/usr/bin/env python3
"""A Skein external agent in Python, standard library only.

It long-polls ``POST /v1/tasks/claim`` for tasks of its agent types, runs the handler of each
task's agent_type while a background thread renews the lease, then reports ``complete`` (with
an optional route) or ``fail``. ``task["step"](name, fn)`` is a durable step (docs/durable-steps.md):
``fn(idempotency_key)`` runs once per visit, its result recorded with ``POST .../steps`` before it
is used; a later attempt gets the recorded result from its claim without calling ``fn``. A 409 means the server no longer counts on this worker for the
attempt (lease expired, run cancelled): the task is dropped, never reported again.

    SKEIN_TOKEN=... python3 agent.py --server http://127.0.0.1:8080 --agent-types summarize,classify,notify
"""
from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict

log = logging.getLogger("agent")
Task = Dict[str, Any]
WAIT_SECONDS = 20  # long poll; the server allows up to 30
# Routes whose request may arrive twice without changing anything: a heartbeat renews the same
# lease and a report is fenced by its attempt (the same report again is answered "duplicate").
# Not a claim: one the server read has leased tasks that would wait out their lease.
# A step recorded twice keeps the first record and answers it.
RESENDABLE = ("/heartbeat", "/complete", "/fail", "/steps")
# A connection closed before any answer: the server closing it (a restart, an idle timeout).
RESET = (ConnectionResetError, BrokenPipeError)


class NonRetryable(Exception):
    """Raised by a handler when trying again cannot help: the visit fails without retries."""


class Lost(Exception):
    """The server answered 409: this worker no longer holds the attempt."""


class ApiError(Exception):
    """Any other refusal (bad token, bad request): retrying the same call will not help."""


class Shutdown(BaseException):
    """Raised by the signal handler to cut a long poll short (BaseException: nothing swallows it)."""


@dataclass
class Route:
    """A handler's output with the branch to take: node ids among the node's next_on_success."""

    next: str | list[str]
    output: Any


# -- Handlers: one per agent_type. Each gets the task and an Event set if the task is lost. --

def summarize(task: Task, lost: threading.Event) -> Any:
    """The first ``max_words`` words of payload.text, else of input.topic."""
    payload, run_input = task["payload"] or {}, task["input"] or {}
    text = payload.get("text") or run_input.get("topic")
    if not text:
        raise NonRetryable("nothing to summarize: give the run's input a text or a topic")
    # Stands in for a slow model call; stops early when the task is lost (e.g. run cancelled).
    if lost.wait(float(run_input.get("work_seconds", 0))):
        return None
    # The model's answer is a durable step: a retry of this visit reuses it instead of paying again.
    summary = task["step"]("model:1", lambda _key: " ".join(str(text).split()[: int(payload.get("max_words", 12))]))
    return {"summary": summary}


URGENT = {"outage", "down", "breach", "urgent", "failing"}


def classify(task: Task, lost: threading.Event) -> Route:
    """Labels the summary and routes it: urgent ones to `escalate`, the rest to `publish`."""
    words = {w.strip(".,;:!?").lower() for w in str(task["payload"].get("summary") or "").split()}
    label = "urgent" if words & URGENT else "routine"
    return Route(next="escalate" if label == "urgent" else "publish", output={"label": label})


def notify(task: Task, lost: threading.Event) -> Any:
    """Posts the message to its channel (here, to the log)."""
    # A side effect. A real notifier sends execution_id as the idempotency key: it is the same on
    # every attempt of this visit, so a retry after a report that never arrived posts only once.
    payload = task["payload"]
    log.info("notify %s: %s", payload["channel"], payload["message"])
    return {"channel": payload["channel"], "message_id": task["execution_id"]}


class Steps:
    """``task["step"]``: the durable steps of one claimed task (docs/durable-steps.md)."""

    def __init__(self, api: "Api", task: Task, worker_id: str) -> None:
        self.api, self.worker_id = api, worker_id
        self.eid, self.attempt = task["execution_id"], task["attempt"]
        # What earlier attempts of the visit recorded: the claim answers it.
        self.recorded = {s["name"]: s["output"] for s in task.get("steps") or []}
        self.used: set[str] = set()

    def __call__(self, name: str, fn: Callable[[str], Any]) -> Any:
        if name in self.used:
            raise NonRetryable(f"step {name!r} was called twice in one attempt: give each call its own name")
        self.used.add(name)
        if name in self.recorded:
            return self.recorded[name]
        output = fn(f"{self.eid}:{name}")  # the idempotency key: the same on every attempt
        answer = self.api.post(f"/v1/tasks/{urllib.parse.quote(self.eid, safe='')}/steps",
                               {"attempt": self.attempt, "worker_id": self.worker_id, "name": name,
                                "output": output})
        return answer["output"]  # an earlier attempt's record, if one won


Handler = Callable[[Task, threading.Event], Any]
HANDLERS: dict[str, Handler] = {"summarize": summarize, "classify": classify, "notify": notify}


def parse_error(body: bytes) -> dict[str, Any]:
    """The ``error`` of the API's error shape ``{ "error": { code, message, details } }``."""
    try:
        return json.loads(body).get("error", {})
    except (ValueError, AttributeError):  # not the API's answer (a proxy's page, say)
        return {}


class Api:
    """The task routes over urllib, retrying connection errors and 5xx with a short backoff.

    A resendable request cut by a reset connection before any answer is sent again once at once,
    whatever ``retries`` says: heartbeats, which are not otherwise retried, get through too.
    """

    def __init__(self, server: str, token: str) -> None:
        self.server, self.token = server.rstrip("/"), token

    def post(self, path: str, body: dict[str, Any], timeout: float = 15, retries: int | None = 5) -> Any:
        """POSTs JSON and returns the decoded answer; ``retries=None`` retries for ever."""
        delay, tries, resent = 0.5, 0, False
        while True:
            headers = {"Content-Type": "application/json"}
            if self.token:  # a server without tokens is open (and listens on loopback only)
                headers["Authorization"] = f"Bearer {self.token}"
            request = urllib.request.Request(self.server + path, json.dumps(body).encode(), headers)
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:
                    return json.load(response)
            except urllib.error.HTTPError as e:
                error = parse_error(e.read())
                message = f"{e.code} {error.get('code', '')}: {error.get('message', e.reason)}"
                if e.code == 409:
                    raise Lost(message) from None
                if e.code < 500 and e.code != 429:  # 429: over the token's rate; wait and try again
                    raise ApiError(message) from None
                problem: object = message
            except (OSError, http.client.HTTPException) as e:  # refused, reset, timed out: restarting?
                # urllib wraps an error while sending in URLError; one while reading the answer is bare.
                reason = e.reason if isinstance(e, urllib.error.URLError) else e
                if isinstance(reason, RESET) and path.endswith(RESENDABLE) and not resent:
                    resent = True
                    continue
                problem = e
            tries += 1
            if retries is not None and tries > retries:
                raise ApiError(f"POST {path} failed {tries} times, last: {problem}")
            log.warning("POST %s: %s; again in %.1f s", path, problem, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10)


class Worker:
    """Claims one task at a time, runs it, reports it; stops after ``max_tasks`` or a signal."""

    def __init__(self, api: Api, agent_types: list[str], worker_id: str, lease_seconds: float,
                 max_tasks: int | None) -> None:
        self.api, self.agent_types, self.worker_id = api, agent_types, worker_id
        self.lease_seconds, self.max_tasks = lease_seconds, max_tasks
        self.stopping, self.idle = False, False

    def stop(self, signum: int, _frame: Any) -> None:
        """SIGTERM/SIGINT: finish the current task, or stop polling at once when idle."""
        log.info("%s: stopping after the current task", signal.Signals(signum).name)
        self.stopping = True
        if self.idle:
            raise Shutdown()

    def run(self) -> None:
        """Claims and handles tasks until stopped."""
        log.info("claiming %s as %s", ",".join(self.agent_types), self.worker_id)
        done = 0
        while not self.stopping and (self.max_tasks is None or done < self.max_tasks):
            try:
                self.idle = True
                # A task the server leased just as a signal cut this poll comes back after its lease.
                tasks = self.api.post("/v1/tasks/claim", {
                    "agent_types": self.agent_types, "worker_id": self.worker_id, "max_tasks": 1,
                    "lease_seconds": self.lease_seconds, "wait_seconds": WAIT_SECONDS,
                }, timeout=WAIT_SECONDS + 15, retries=None)["tasks"]
            except Shutdown:
                break
            finally:
                self.idle = False
            for task in tasks:
                done += self.handle(task)
        log.info("stopped after %d task(s)", done)

    def handle(self, task: Task) -> bool:
        """Runs one task and reports it; False when the task was lost or could not be reported."""
        eid, attempt = task["execution_id"], task["attempt"]
        log.info("claimed %s (%s, attempt %d)", eid, task["agent_type"], attempt)
        lost, finished = threading.Event(), threading.Event()
        beat = threading.Thread(target=self.heartbeat, args=(eid, attempt, lost, finished), daemon=True)
        beat.start()
        task["step"] = Steps(self.api, task, self.worker_id)
        try:
            result = HANDLERS[task["agent_type"]](task, lost)
            # Every report names the worker: the server binds the attempt to its token and worker_id.
            kind, body = "complete", {"attempt": attempt, "worker_id": self.worker_id, "output": result}
            if isinstance(result, Route):
                body.update(output=result.output, next=result.next)
        except Exception as e:  # noqa: BLE001 - any handler error fails the attempt
            retryable = not isinstance(e, NonRetryable)
            log.warning("%s failed (%s): %s", eid, "retryable" if retryable else "for good", e)
            error = {"message": str(e) or type(e).__name__, "type": type(e).__name__}
            kind, body = "fail", {"attempt": attempt, "worker_id": self.worker_id, "error": error,
                                  "retryable": retryable}
        finally:
            finished.set()
            beat.join()
        if lost.is_set():
            return False  # the heartbeat thread logged it; a report now would be another 409
        try:
            # An identical report sent twice is answered "duplicate", so retrying it is safe.
            self.api.post(f"/v1/tasks/{urllib.parse.quote(eid, safe='')}/{kind}", body)
        except Lost as e:
            log.warning("lost %s (%s): dropping it", eid, e)
            return False
        except ApiError as e:
            log.error("could not report %s (%s): its lease will expire and it will run again", eid, e)
            return False
        log.info("%s %s", "completed" if kind == "complete" else "failed", eid)
        return True

    def heartbeat(self, eid: str, attempt: int, lost: threading.Event, finished: threading.Event) -> None:
        """Renews the lease every lease/3 s until the handler finishes; sets ``lost`` on a 409."""
        while not finished.wait(self.lease_seconds / 3):
            try:
                self.api.post(f"/v1/tasks/{urllib.parse.quote(eid, safe='')}/heartbeat",
                              {"attempt": attempt, "worker_id": self.worker_id,
                               "lease_seconds": self.lease_seconds}, retries=0)
            except Lost as e:
                log.warning("lost %s (%s): dropping it", eid, e)
                lost.set()
                return
            except ApiError as e:  # the next beat may get through before the lease ends
                log.warning("heartbeat for %s: %s", eid, e)


def main() -> None:
    parser = argparse.ArgumentParser(description="A Skein external agent (standard library only).")
    parser.add_argument("--server", default=os.environ.get("SKEIN_SERVER", "http://127.0.0.1:8080"))
    parser.add_argument("--token", default=os.environ.get("SKEIN_TOKEN", ""),
                        help="an agent token (default $SKEIN_TOKEN, which keeps it out of `ps`)")
    parser.add_argument("--agent-types", default=",".join(HANDLERS), help="comma-separated")
    parser.add_argument("--worker-id", default=f"py-{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("--lease-seconds", type=float, default=30)
    parser.add_argument("--max-tasks", type=int, help="exit 0 after reporting this many tasks")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    agent_types = [t for t in args.agent_types.split(",") if t]
    unknown = [t for t in agent_types if t not in HANDLERS]
    if unknown:
        parser.error(f"no handler for {', '.join(unknown)}; known: {', '.join(HANDLERS)}")
    api = Api(args.server, args.token)
    worker = Worker(api, agent_types, args.worker_id, args.lease_seconds, args.max_tasks)
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    try:
        worker.run()
    except ApiError as e:  # a bad token or request: say so and stop
        log.error("%s", e)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
