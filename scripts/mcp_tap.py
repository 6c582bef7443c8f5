"""Run a command and keep a copy of every byte of its stdin and stdout, for byte-for-byte checks.

    python3 mcp_tap.py DIR -- COMMAND ARGS...

Bytes read on stdin are written to the command's stdin and appended to DIR/stdin.bin; bytes the
command writes on stdout are passed on and appended to DIR/stdout.bin. The exit status is the
command's.
"""

import os
import subprocess
import sys
import threading


def pump(source, destination, log_path, close_destination):
    with open(log_path, "wb") as log:
        while True:
            chunk = os.read(source, 65536)
            if not chunk:
                break
            log.write(chunk)
            log.flush()
            try:
                write_all(destination, chunk)
            except BrokenPipeError:
                break
    if close_destination:
        os.close(destination)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def main():
    directory = sys.argv[1]
    command = sys.argv[3:] if sys.argv[2] == "--" else sys.argv[2:]
    os.makedirs(directory, exist_ok=True)
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    inbound = threading.Thread(
        target=pump,
        args=(0, child.stdin.fileno(), os.path.join(directory, "stdin.bin"), True),
        daemon=True,
    )
    inbound.start()
    pump(child.stdout.fileno(), 1, os.path.join(directory, "stdout.bin"), False)
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
