#!/usr/bin/env python3
"""Issue 24's floor on the wire: what answering a body of an account's size costs over a loopback keep-alive
connection against a body of one subscription's size, with no work behind either (a fixed answer from memory).

Serves GET /a with A bytes and GET /b with B bytes, one connection at a time, each response written with one
sendall, on a free loopback port; prints the port and serves until killed. Drive it with `wrk -t1 -c1`, as
Benchmarks/scripts/accounts_http.sh drives receiptd:
    Benchmarks/scripts/accounts_bytes_floor.py 416729 69861
"""
import socket
import sys

sizes = {b"/a": int(sys.argv[1]), b"/b": int(sys.argv[2])}
answers = {
    path: b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size
    for path, size in sizes.items()
}
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
while True:
    connection, _ = listener.accept()
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending = b""
    with connection:
        while True:
            try:
                data = connection.recv(65536)
            except ConnectionResetError:  # wrk resets its connections when it stops
                break
            if not data:
                break
            pending += data
            while b"\r\n\r\n" in pending:
                head, pending = pending.split(b"\r\n\r\n", 1)
                path = head.split(b" ", 2)[1]
                connection.sendall(answers.get(path, answers[b"/b"]))
