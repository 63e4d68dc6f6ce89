"""A local client that reopens connections as fast as they are closed, for the obsctl web tests
(Tests/ObsctlTests/EndToEnd/WebTests.swift): it keeps COUNT connections open to HOST:PORT, sending
nothing, and opens a new one as soon as the server closes one. The tests run it as another user.

    storm.py HOST PORT COUNT

Prints "ready" once the first are open, then answers each line on stdin with how many it has
opened again so far; exits at the end of its input.
"""
import selectors
import socket
import sys


def main():
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    selector = selectors.DefaultSelector()
    reopened = 0

    def open_one():
        connection = socket.socket(family, socket.SOCK_STREAM)
        connection.setblocking(False)
        try:
            connection.connect((host, port))
        except BlockingIOError:
            pass
        except OSError:
            connection.close()
            return
        selector.register(connection, selectors.EVENT_READ)

    for _ in range(count):
        open_one()
    selector.register(sys.stdin, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.fileobj is sys.stdin:
                if not sys.stdin.readline():
                    return
                print(reopened, flush=True)
                continue
            connection = key.fileobj
            try:
                if connection.recv(65536):
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            selector.unregister(connection)
            connection.close()
            # A connection that failed to open counts too: the server closed it at once.
            open_one()
            reopened += 1


if __name__ == "__main__":
    main()
