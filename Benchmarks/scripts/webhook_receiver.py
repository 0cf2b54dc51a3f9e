"""A local webhook receiver for the ingest and delivery benchmarks: answers every POST 200 (or --status) on keep-alive
connections, counts the events it took (2xx) by their Receiptd-Event-Id, and writes a line to --report once --expect
distinct events arrived (events/s from the first to the last). Loopback only."""

import argparse
import asyncio
import time

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--expect", type=int, default=0, help="distinct events after which to report (0: never)")
parser.add_argument("--report", help="file that receives the report line")
parser.add_argument("--status", type=int, default=200, help="the status every POST gets (500: a failing receiver)")
arguments = parser.parse_args()

seen = set()
posts = 0
first = None
reported = False


def record(event_id):
    global first, posts, reported
    posts += 1
    now = time.monotonic()
    if first is None:
        first = now
    seen.add(event_id)
    if not reported and arguments.expect and len(seen) >= arguments.expect:
        reported = True
        seconds = max(now - first, 1e-9)
        line = f"{len(seen)} distinct events ({posts} posts) in {seconds:.2f} s: {len(seen) / seconds:.0f} events/s\n"
        if arguments.report:
            with open(arguments.report, "w") as report:
                report.write(line)
        print(line, end="", flush=True)


async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            event_id = None
            expects_continue = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"receiptd-event-id":
                    event_id = value.strip()
                elif name == b"expect" and value.strip().lower() == b"100-continue":
                    expects_continue = True
            if expects_continue:
                # libcurl asks before sending a body over 1 KiB, and would otherwise wait a second for the answer.
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = await reader.readexactly(length)
            if head.startswith(b"POST") and arguments.status < 300:
                record(event_id or body)
            writer.write(b"HTTP/1.1 %d Answer\r\nContent-Length: 0\r\n\r\n" % arguments.status)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", arguments.port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
