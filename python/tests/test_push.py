"""`tachyon push` against a scripted HTTP receiver on the loopback.

    python test_push.py      (opentelemetry-proto installed; run by scripts/fleet.sh)

The receiver answers each request with the next status of a script (200, 429, 503, 400 …),
records what arrived, and decodes every OTLP request with OpenTelemetry's own messages.
Checked: retried requests arrive whole and equal to `tachyon convert --to otlp`; nothing is
sent again after a 200; a 400 stops the push with the server's words; Retry-After is
waited; headers (authentication, gzip) are sent; Pyroscope's /ingest gets its query and a
multipart pprof or folded stacks of the same samples.
"""
import email.parser
import gzip
import http.server
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse
from collections import Counter

from opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2 import (
    ExportProfilesServiceRequest,
    ExportProfilesServiceResponse,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("TACHYON_CLI", os.path.join(ROOT, "target", "release", "tachyon"))
FIXTURES = os.path.join(ROOT, "qemu-tests", "fixtures", "real-3.15.2")
FILES = [os.path.join(FIXTURES, n) for n in ("threads_wall_zstd.pyb", "recursion_deep_raw.pyb", "mixed_gil_raw.pyb")]
BURN = os.path.join(ROOT, "qemu-tests", "vectors", "gperftools-2.10", "x86_64-le64-gperftools2.10", "burn-x86_64.prof")


class Receiver:
    """An HTTP server on 127.0.0.1 answering from a script of (status, body, headers); HTTPS
    with `tls`, a server-side `ssl.SSLContext`."""

    def __init__(self, script, tls=None):
        self.script = list(script)
        self.requests = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((self.path, dict(self.headers), body, time.monotonic()))
                status, text, headers = receiver.script.pop(0) if receiver.script else (200, b"", {})
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def push(url, *args):
    return subprocess.run(
        [CLI, "--quiet", "push", "--endpoint", url, "--retry-wait-ms", "20", *args], capture_output=True, text=True
    )


def otlp_of(f, service):
    return subprocess.run(
        [CLI, "convert", f, "--to", "otlp", "--service-name", service], check=True, capture_output=True
    ).stdout


def collapsed(args):
    out = subprocess.run([CLI, "--quiet", *args], check=True, capture_output=True, text=True).stdout
    c = Counter()
    for line in out.splitlines():
        stack, n = line.rsplit(" ", 1)
        c[stack] += int(n)
    return c


class PushTest(unittest.TestCase):
    def receiver(self, script, tls=None):
        r = Receiver(script, tls)
        self.addCleanup(r.close)
        return r

    def test_retries_arrive_whole_and_nothing_twice(self):
        r = self.receiver([(503, b"busy", {}), (200, b"", {}), (429, b"slow down", {}), (503, b"", {}), (200, b"", {})])
        p = push(r.url, *FILES, "--service-name", "checkout", "-H", "Authorization: Bearer s3cret", "-H", "X-Scope-OrgID: t1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(r.requests), 6)
        want = [otlp_of(f, "checkout") for f in FILES]
        # file 1 twice (503, 200), file 2 three times (429, 503, 200), file 3 once.
        sent = [gzip.decompress(body) for _, _, body, _ in r.requests]
        self.assertEqual(sent, [want[0], want[0], want[1], want[1], want[1], want[2]])
        for path, headers, body, _ in r.requests:
            self.assertEqual(path, "/v1development/profiles")
            self.assertEqual(headers["Content-Type"], "application/x-protobuf")
            self.assertEqual(headers["Content-Encoding"], "gzip")
            self.assertEqual(headers["Authorization"], "Bearer s3cret")
            self.assertEqual(headers["X-Scope-OrgID"], "t1")
            msg = ExportProfilesServiceRequest()
            msg.ParseFromString(gzip.decompress(body))
            attrs = {kv.key: kv.value.string_value for kv in msg.resource_profiles[0].resource.attributes}
            self.assertEqual(attrs, {"service.name": "checkout"})
            self.assertTrue(msg.resource_profiles[0].scope_profiles[0].profiles[0].samples)

    def test_a_400_stops_with_the_servers_words(self):
        r = self.receiver([(200, b"", {}), (400, b"profile has no sample types", {})])
        p = push(r.url, *FILES)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"{FILES[1]}: the server refused it (400): Bad Request — profile has no sample types", p.stderr)
        self.assertEqual(len(r.requests), 2)

    def test_keep_going_skips_a_refused_file(self):
        r = self.receiver([(413, b"too large", {}), (200, b"", {}), (200, b"", {})])
        p = push(r.url, *FILES, "--keep-going")
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"skipped {FILES[0]}: the server refused it (413)", p.stderr)
        self.assertIn("pushed 2 of 3 files (1 skipped)", p.stderr)
        self.assertEqual(len(r.requests), 3)

    def test_gives_up_after_the_attempts(self):
        r = self.receiver([(503, b"", {})] * 10)
        p = push(r.url, FILES[0], "--attempts", "3")
        self.assertEqual(p.returncode, 1)
        self.assertIn("gave up after 3 attempts: 503 Service Unavailable", p.stderr)
        self.assertEqual(len(r.requests), 3)
        # Backoff: 20 ms, then 40 ms.
        (_, _, _, t0), (_, _, _, t1), (_, _, _, t2) = r.requests
        self.assertGreaterEqual(t1 - t0, 0.02)
        self.assertGreaterEqual(t2 - t1, 0.04)

    def test_retry_after_is_waited(self):
        r = self.receiver([(429, b"", {"Retry-After": "1"}), (200, b"", {})])
        p = push(r.url, FILES[0])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreaterEqual(r.requests[1][3] - r.requests[0][3], 1.0)

    def test_a_closed_port_is_retried_then_named(self):
        r = self.receiver([])
        url = r.url
        r.close()
        p = push(url, FILES[0], "--attempts", "2")
        self.assertEqual(p.returncode, 1)
        self.assertIn("gave up after 2 attempts: Connection refused", p.stderr)

    def test_partial_success_is_reported(self):
        answer = ExportProfilesServiceResponse()
        answer.partial_success.rejected_profiles = 1
        answer.partial_success.error_message = "unknown frame type"
        r = self.receiver([(200, answer.SerializeToString(), {"Content-Type": "application/x-protobuf"})])
        p = subprocess.run([CLI, "push", "--endpoint", r.url, FILES[0]], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("taken in part: 1 profiles rejected: unknown frame type", p.stderr)

    def test_pyroscope_ingest(self):
        for protocol, fmt in (("pyroscope-pprof", "pprof"), ("pyroscope-folded", "folded")):
            with self.subTest(protocol=protocol):
                r = self.receiver([(200, b"", {})] * 2)
                p = push(r.url, FILES[0], BURN, "--protocol", protocol, "--service-name", "shop{env=prod}", "--basic-auth", "123:tok")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(len(r.requests), 2)
                for (path, headers, body, _), f, rate in zip(r.requests, (FILES[0], BURN), (1000, 100)):
                    url = urllib.parse.urlsplit(path)
                    q = dict(urllib.parse.parse_qsl(url.query))
                    self.assertEqual(url.path, "/ingest")
                    self.assertEqual((q["name"], q["format"], q["sampleRate"]), ("shop{env=prod}", fmt, str(rate)))
                    self.assertLessEqual(int(q["from"]), int(q["until"]))
                    self.assertEqual(headers["Authorization"], "Basic MTIzOnRvaw==")
                    want = collapsed(["merge", f, "--to", "collapsed", "-o", "/dev/stdout"])
                    if fmt == "folded":
                        got = Counter()
                        for line in body.decode().splitlines():
                            stack, n = line.rsplit(" ", 1)
                            got[stack] += int(n)
                        self.assertEqual(got, want)
                    else:
                        msg = email.parser.BytesParser().parsebytes(
                            b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + body
                        )
                        [part] = msg.get_payload()
                        self.assertEqual(part.get_param("name", header="content-disposition"), "profile")
                        pb = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"push-test-{os.getpid()}.pb.gz")
                        with open(pb, "wb") as out:
                            out.write(part.get_payload(decode=True))
                        try:
                            # The file folded alone, as `tachyon merge --to pprof` makes it.
                            subprocess.run([CLI, "merge", f, "--to", "pprof", "-o", pb + ".want"], check=True)
                            samples = ["--sample-index", "samples", "--to", "collapsed"]
                            got = collapsed(["convert", pb, *samples])
                            self.assertEqual(got, collapsed(["convert", pb + ".want", *samples]))
                            self.assertEqual(sum(got.values()), sum(want.values()))
                        finally:
                            for x in (pb, pb + ".want"):
                                if os.path.exists(x):
                                    os.remove(x)
                    if f == FILES[0]:
                        self.assertGreater(int(q["from"]), 1_600_000_000)



def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


class Certificates:
    """A throwaway certificate authority and server certificates made with openssl: one for
    127.0.0.1, one for another name, one expired (valid until before it was made)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tachyon-tls-")
        d = lambda n: os.path.join(self.dir, n)  # noqa: E731
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", d("ca.key"), "-out", d("ca.pem"), "-days", "2", "-subj", "/CN=tachyon test CA")
        self.ca = d("ca.pem")
        for name, san, days in (
            ("good", "IP:127.0.0.1,DNS:localhost", "2"),
            ("wrong-name", "DNS:profiles.example", "2"),
            ("expired", "IP:127.0.0.1,DNS:localhost", "-1"),
        ):
            openssl("req", *ec, "-keyout", d(name + ".key"), "-out", d(name + ".csr"), "-subj", "/CN=" + name)
            with open(d(name + ".ext"), "w") as f:
                f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n")
            openssl("x509", "-req", "-in", d(name + ".csr"), "-CA", self.ca, "-CAkey", d("ca.key"), "-CAcreateserial",
                    "-days", days, "-extfile", d(name + ".ext"), "-out", d(name + ".pem"))

    def server(self, name):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(self.dir, name + ".pem"), os.path.join(self.dir, name + ".key"))
        return ctx

    def close(self):
        shutil.rmtree(self.dir)


class HttpsTest(unittest.TestCase):
    """Issue 39: pushes over HTTPS to loopback servers with a throwaway CA; each refusal says
    why, exits 1 and is not retried."""

    @classmethod
    def setUpClass(cls):
        cls.certs = Certificates()

    @classmethod
    def tearDownClass(cls):
        cls.certs.close()

    def receiver(self, script, tls=None):
        r = Receiver(script, tls)
        self.addCleanup(r.close)
        return r

    def test_otlp_and_pyroscope_over_https_with_the_private_ca(self):
        r = self.receiver([(200, b"", {})] * 3, self.certs.server("good"))
        p = push(r.url, *FILES, "--service-name", "checkout", "--cacert", self.certs.ca)
        self.assertEqual(p.returncode, 0, p.stderr)
        sent = [gzip.decompress(body) for _, _, body, _ in r.requests]
        self.assertEqual(sent, [otlp_of(f, "checkout") for f in FILES])
        for body in sent:
            msg = ExportProfilesServiceRequest()
            msg.ParseFromString(body)
            self.assertTrue(msg.resource_profiles[0].scope_profiles[0].profiles[0].samples)
        # Pyroscope, the CA named by the OpenTelemetry exporters' variable instead.
        r = self.receiver([(200, b"", {})], self.certs.server("good"))
        env = dict(os.environ, OTEL_EXPORTER_OTLP_CERTIFICATE=self.certs.ca)
        p = subprocess.run([CLI, "--quiet", "push", "--endpoint", r.url, FILES[0], "--protocol", "pyroscope-folded",
                            "--service-name", "shop"], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        (path, _, body, _), = r.requests
        self.assertTrue(path.startswith("/ingest?name=shop&"), path)
        got = Counter()
        for line in body.decode().splitlines():
            stack, n = line.rsplit(" ", 1)
            got[stack] += int(n)
        self.assertEqual(got, collapsed(["merge", FILES[0], "--to", "collapsed", "-o", "/dev/stdout"]))

    def refused(self, url, *args):
        # Not --quiet: a retry would say "trying again".
        p = subprocess.run([CLI, "push", "--endpoint", url, FILES[0], "--attempts", "3", "--retry-wait-ms", "20",
                            "--timeout", "5", *args], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertNotIn("trying again", p.stderr)
        return p.stderr

    def test_an_unknown_ca_is_refused(self):
        r = self.receiver([], self.certs.server("good"))
        self.assertIn("127.0.0.1's certificate is not signed by an authority this push trusts (for a private CA: --cacert FILE)",
                      self.refused(r.url))
        self.assertEqual(r.requests, [])

    def test_a_certificate_for_another_name_is_refused(self):
        r = self.receiver([], self.certs.server("wrong-name"))
        self.assertIn("127.0.0.1's certificate is for another name than 127.0.0.1", self.refused(r.url, "--cacert", self.certs.ca))
        self.assertEqual(r.requests, [])

    def test_an_expired_certificate_is_refused(self):
        r = self.receiver([], self.certs.server("expired"))
        self.assertIn("127.0.0.1's certificate has expired", self.refused(r.url, "--cacert", self.certs.ca))
        self.assertEqual(r.requests, [])

    def test_a_plain_http_server_behind_https_is_refused(self):
        r = self.receiver([])
        url = r.url.replace("http://", "https://")
        self.assertIn("127.0.0.1 does not speak TLS there (a plain http:// server behind an https:// URL?)",
                      self.refused(url, "--cacert", self.certs.ca))
        self.assertEqual(r.requests, [])

    def test_cacert_is_for_https(self):
        p = push("http://127.0.0.1:9", FILES[0], "--cacert", self.certs.ca)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--cacert is for https:// endpoints", p.stderr)
        p = push("https://127.0.0.1:9", FILES[0], "--cacert", os.path.join(self.certs.dir, "nothing.pem"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("nothing.pem", p.stderr)

if __name__ == "__main__":
    unittest.main(verbosity=2)
