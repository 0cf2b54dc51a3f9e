"""POSTs one body to /v1/validate COUNT times on one keep-alive connection, for a server run under callgrind or
strace (compare.sh real-path). Waits for the server to listen first; every answer must be 200."""

import argparse
import http.client
import time

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--count", type=int, required=True)
parser.add_argument("--body", required=True)
parser.add_argument("--type", required=True, help="the Content-Type to send")
arguments = parser.parse_args()
body = open(arguments.body, "rb").read()
for _ in range(600):
    try:
        connection = http.client.HTTPConnection("127.0.0.1", arguments.port)
        connection.request("GET", "/healthz")
        connection.getresponse().read()
        break
    except OSError:
        time.sleep(0.1)
for _ in range(arguments.count):
    connection.request("POST", "/v1/validate", body=body, headers={"Content-Type": arguments.type})
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        raise SystemExit(f"answered {response.status}")
