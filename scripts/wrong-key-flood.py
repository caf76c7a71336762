#!/usr/bin/env python3
# A wrong-key flood against a `tollgate serve --keys` running on 127.0.0.1: N requests on
# fresh connections, each announcing and sending a body of SIZE bytes with a key that
# matches none; prints how many were answered 401 and the gateway's CPU time (user +
# system, from /proc/PID/stat) per rejection. 127.0.0.1 only; the loop is bounded by N.
#
#   python3 scripts/wrong-key-flood.py PORT GATEWAY_PID N SIZE
import socket, sys, time, os
port=int(sys.argv[1]); pid=int(sys.argv[2]); n=int(sys.argv[3]); size=int(sys.argv[4])
def cpu(pid):
    f=open(f"/proc/{pid}/stat").read().split(")")[1].split()
    return (int(f[11])+int(f[12]))/os.sysconf("SC_CLK_TCK")
body=b"x"*size
head=(f"POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\nauthorization: Bearer wrong\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n").encode()
c0=cpu(pid); ok=0
for i in range(n):
    s=socket.create_connection(("127.0.0.1",port))
    s.sendall(head)
    try:
        s.sendall(body)
    except OSError:
        pass
    r=s.recv(4096)
    ok+= r.startswith(b"HTTP/1.1 401")
    s.close()
c1=cpu(pid)
print(f"{n} requests of {size} bytes: {ok} answered 401; gateway CPU {1e6*(c1-c0)/n:.0f} us per rejection")
