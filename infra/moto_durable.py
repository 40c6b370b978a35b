"""moto's server (S3, SQS) with durable S3: every S3 write it acknowledged is kept on disk.

moto keeps its state in memory. The local stack keeps its raw artifacts and file drops in S3,
so that they must survive a stop of the engines like the DynamoDB Local tables beside them
(which run with -dbPath). This wrapper runs moto's own WSGI application and appends every S3
request that changed state and was answered 2xx (PUT, POST, DELETE; not bucket notification
settings, which the local stack sets at each start) to a log file, fsynced before the answer
leaves. At start it replays the log, in order, into the fresh in-memory moto, so that buckets
and objects are back byte for byte before the first request is served.

SQS is not logged: its state (receipt handles, visibility timers, receive counts) cannot be
replayed faithfully. The local stack keeps the queue engine alive across restarts of the
functions instead, and saves what is left in the queues on a graceful stop
(see docs/adr/0028-what-survives-which-stop.md).

Usage: python moto_durable.py --log FILE [-H HOST] [-p PORT]
"""

import argparse
import base64
import io
import json
import os
import signal
import sys
import threading

from werkzeug.serving import run_simple
from werkzeug.test import EnvironBuilder

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)

WRITE_METHODS = {"PUT", "POST", "DELETE"}
# Settings the local stack re-applies at each start, and which name resources (queues) that a
# restarted moto may not have yet.
SKIPPED_SUBRESOURCES = ("notification",)


def is_s3(environ):
    """True when the request is signed for S3 (header or presigned query)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    query = environ.get("QUERY_STRING", "")
    return "/s3/aws4_request" in auth or "%2Fs3%2Faws4_request" in query


def read_body(environ):
    length = environ.get("CONTENT_LENGTH") or ""
    stream = environ["wsgi.input"]
    if length.isdigit():
        return stream.read(int(length))
    if environ.get("wsgi.input_terminated"):
        return stream.read()
    return b""


class DurableS3:
    """WSGI middleware: logs acknowledged S3 writes, replays them at start."""

    def __init__(self, app, log_path):
        self.app = app
        self.log_path = log_path
        self.lock = threading.Lock()
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)

    def replay(self):
        if not os.path.exists(self.log_path):
            return 0
        count = 0
        with open(self.log_path, "rb") as log:
            for number, line in enumerate(log, start=1):
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    # A torn last line (the engine was killed mid-append) was never
                    # acknowledged: its request got no answer.
                    print(f"moto_durable: skipping unreadable line {number} of {self.log_path}", file=sys.stderr)
                    continue
                body = base64.b64decode(record["body"])
                environ = EnvironBuilder(method=record["method"], data=body).get_environ()
                # The application routes on the raw request URI as well as PATH_INFO.
                environ["PATH_INFO"] = record["path"]
                environ["QUERY_STRING"] = record["query"]
                uri = record.get("uri") or record["path"] + ("?" + record["query"] if record["query"] else "")
                environ["REQUEST_URI"] = uri
                environ["RAW_URI"] = uri
                for key, value in record["headers"].items():
                    environ[key] = value
                environ["CONTENT_LENGTH"] = str(len(body))
                environ["wsgi.input"] = io.BytesIO(body)
                status = []
                result = self.app(environ, lambda s, h, e=None: status.append(s))
                for _ in result:
                    pass
                if hasattr(result, "close"):
                    result.close()
                if not status or not status[0][:1] == "2":
                    print(f"moto_durable: replayed line {number} answered {status}", file=sys.stderr)
                count += 1
        return count

    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        query = environ.get("QUERY_STRING", "")
        if method not in WRITE_METHODS or not is_s3(environ) or any(
            s in query for s in SKIPPED_SUBRESOURCES
        ):
            return self.app(environ, start_response)
        body = read_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("wsgi.input_terminated", None)
        headers = {
            k: v
            for k, v in environ.items()
            if (k.startswith("HTTP_") or k == "CONTENT_TYPE") and isinstance(v, str)
        }
        record = {
            "method": method,
            "path": environ.get("PATH_INFO", ""),
            "uri": environ.get("REQUEST_URI") or environ.get("RAW_URI") or "",
            "query": query,
            "headers": headers,
            "body": base64.b64encode(body).decode("ascii"),
        }

        def logging_start_response(status, response_headers, exc_info=None):
            if status[:1] == "2":
                line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
                with self.lock:
                    with open(self.log_path, "ab") as log:
                        log.write(line)
                        log.flush()
                        os.fsync(log.fileno())
            return start_response(status, response_headers, exc_info)

        return self.app(environ, logging_start_response)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", required=True, help="the S3 request log (created if missing)")
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    moto = DomainDispatcherApplication(create_backend_app)
    app = DurableS3(moto, args.log)
    replayed = app.replay()
    print(f"moto_durable: replayed {replayed} S3 writes from {args.log}", file=sys.stderr, flush=True)
    run_simple(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
