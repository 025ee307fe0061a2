"""Source text for the tiny HTTP servers the bench's process tests start as peers."""

# Appended to a server script: answers every GET with 200 on 127.0.0.1:<argv[1]>, logging nothing.
SERVE_200 = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""
