#!/usr/bin/env python3
"""A small Hugging Face Hub emulator for bertfit's hub tests; it listens on 127.0.0.1 only.

It answers `HEAD|GET /{repo}/resolve/{revision}/{file}` with the headers the Hub sends
(X-Repo-Commit, ETag / X-Linked-Etag / X-Linked-Size, X-Error-Code) and serves large files
through a 302 to a "CDN" path, on its own port (another origin: it must never see the token) or
on the Hub's port. It can cut a transfer once after N bytes, corrupt a large file, gate a
repository behind a token and redirect a renamed repository with a relative 307.

Usage: hub_emulator.py --config CONFIG.json --port-file PORTS.json --log LOG.jsonl
  CONFIG.json: {
    "token": "hf_...",             token that gated repositories accept
    "lfs_threshold": 1024,         files of at least this many bytes are large (LFS) files
    "repos": {"org/name": {
      "refs": {"main": COMMIT, ...},       branches and tags
      "commits": {COMMIT: FOLDER, ...},    the files of each commit
      "gated": false,
      "cdn": "other" | "same",             where large files are served from (default other)
      "moved_to": "org/new",               a renamed repository (307 with a relative Location)
      "cut_once": {FILE: N},               close the connection after N body bytes, once
      "corrupt": [FILE, ...]               serve these large files with one byte changed
    }}}
  PORTS.json is written once both servers listen: {"hub": PORT, "cdn": PORT}.
  LOG.jsonl gets one line per request, written before the answer: server, method, path,
  authorization, range, accept_encoding.
"""
import argparse
import hashlib
import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

COMMIT_LEN = 40


class Emulator:
    def __init__(self, config, log_path):
        self.config = config
        self.token = config.get("token", "")
        self.lfs_threshold = int(config.get("lfs_threshold", 1024))
        self.repos = config["repos"]
        self.log_path = log_path
        self.lock = threading.Lock()
        self.cut_done = set()
        self.hub_port = 0
        self.cdn_port = 0
        # sha256 -> (path, repo, file) for every large file, so the CDN path is content-addressed.
        self.blobs = {}
        for repo_id, repo in self.repos.items():
            for folder in repo.get("commits", {}).values():
                for root, _, names in os.walk(folder):
                    for name in names:
                        path = os.path.join(root, name)
                        if os.path.getsize(path) >= self.lfs_threshold:
                            rel = os.path.relpath(path, folder)
                            self.blobs[sha256_of(path)] = (path, repo_id, rel)

    def log(self, entry):
        with self.lock, open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def make_handler(emu, server_name):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_HEAD(self):
            self.handle_request(head=True)

        def do_GET(self):
            self.handle_request(head=False)

        def handle_request(self, head):
            emu.log({
                "server": server_name,
                "method": "HEAD" if head else "GET",
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "range": self.headers.get("Range"),
                "accept_encoding": self.headers.get("Accept-Encoding"),
            })
            if self.path.startswith("/cdn/"):
                self.serve_cdn(head, self.path[len("/cdn/"):])
            elif server_name == "hub":
                self.serve_resolve(head)
            else:
                self.reply(404, head, {})

        def reply(self, status, head, headers, body=b""):
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def error(self, status, head, code, extra=None):
            headers = {"X-Error-Code": code, "X-Error-Message": code}
            headers.update(extra or {})
            self.reply(status, head, headers, code.encode())

        def serve_resolve(self, head):
            raw = self.path.split("?")[0].lstrip("/").split("/")
            if "resolve" not in raw:
                return self.reply(404, head, {})
            i = raw.index("resolve")
            repo_id = "/".join(raw[:i])
            if len(raw) < i + 3:
                return self.reply(404, head, {})
            raw_revision, raw_file = raw[i + 1], "/".join(raw[i + 2:])
            revision, filename = unquote(raw_revision), unquote(raw_file)
            repo = emu.repos.get(repo_id)
            if repo is None:
                return self.error(404, head, "RepoNotFound")
            if "moved_to" in repo:
                location = "/%s/resolve/%s/%s" % (repo["moved_to"], raw_revision, raw_file)
                return self.reply(307, head, {"Location": location})
            if repo.get("gated"):
                auth = self.headers.get("Authorization")
                if auth is None:
                    return self.error(401, head, "GatedRepo")
                if auth != "Bearer " + emu.token:
                    return self.error(403, head, "GatedRepo")
            commit = repo.get("refs", {}).get(revision, revision)
            folder = repo.get("commits", {}).get(commit)
            if folder is None:
                return self.error(404, head, "RevisionNotFound")
            path = os.path.normpath(os.path.join(folder, filename))
            if not path.startswith(os.path.normpath(folder) + os.sep) or not os.path.isfile(path):
                return self.error(404, head, "EntryNotFound", {"X-Repo-Commit": commit})
            size = os.path.getsize(path)
            if size >= emu.lfs_threshold:
                sha = sha256_of(path)
                port = emu.hub_port if repo.get("cdn", "other") == "same" else emu.cdn_port
                headers = {
                    "Location": "http://127.0.0.1:%d/cdn/%s" % (port, sha),
                    "X-Repo-Commit": commit,
                    "ETag": '"%s"' % git_blob_sha1(b"lfs pointer " + sha.encode()),
                    "X-Linked-Etag": '"%s"' % sha,
                    "X-Linked-Size": str(size),
                }
                return self.reply(302, head, headers)
            with open(path, "rb") as f:
                data = f.read()
            headers = {"X-Repo-Commit": commit, "ETag": '"%s"' % git_blob_sha1(data)}
            self.send_body(head, data, headers, repo, filename)

        def serve_cdn(self, head, sha):
            entry = emu.blobs.get(sha.split("?")[0])
            if entry is None:
                return self.reply(404, head, {})
            path, repo_id, filename = entry
            repo = emu.repos[repo_id]
            with open(path, "rb") as f:
                data = bytearray(f.read())
            if filename in repo.get("corrupt", []):
                data[len(data) // 2] ^= 0xFF
            self.send_body(head, bytes(data), {"ETag": '"%s"' % sha}, repo, filename)

        def send_body(self, head, data, headers, repo, filename):
            start = 0
            status = 200
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and rng.endswith("-") and not head:
                start = int(rng[len("bytes="):-1])
                if start >= len(data):
                    return self.reply(416, head, {"Content-Range": "bytes */%d" % len(data)})
                status = 206
                headers = dict(headers)
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, len(data) - 1, len(data))
            body = data[start:]
            headers = dict(headers)
            headers["Accept-Ranges"] = "bytes"
            cut = repo.get("cut_once", {}).get(filename)
            key = (id(repo), filename)
            if not head and cut is not None and key not in emu.cut_done and len(body) > cut:
                with emu.lock:
                    emu.cut_done.add(key)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.reply(status, head, headers, body)

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that aborts a transfer (as the tests make it) is not an error here


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    with open(args.config) as f:
        config = json.load(f)
    emu = Emulator(config, args.log)
    hub = QuietServer(("127.0.0.1", 0), make_handler(emu, "hub"))
    cdn = QuietServer(("127.0.0.1", 0), make_handler(emu, "cdn"))
    emu.hub_port, emu.cdn_port = hub.server_address[1], cdn.server_address[1]
    threading.Thread(target=cdn.serve_forever, daemon=True).start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"hub": emu.hub_port, "cdn": emu.cdn_port}, f)
    os.rename(tmp, args.port_file)
    hub.serve_forever()


if __name__ == "__main__":
    main()
