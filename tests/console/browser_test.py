#!/usr/bin/env python3
"""The operator console in a real browser (docs/console.md): headless Chromium driven through
chromedriver's W3C WebDriver protocol (plain HTTP, no client library), against a running local
stack that holds the essay demo's data.

    tests/console/browser_test.py --api http://127.0.0.1:8790 --screenshots target/console-screenshots

What it does, as an operator would: a reader's token is refused; the operator's token opens the
quarantine queue, where a webhook whose SKU is `<script>...` (sent here, signed with the local
sample secret) renders as text; the essay's changed replay of page 2 shows stored 6 and received
5 side by side, highlighted; it is accepted as a new delivery with a reason and a confirmation,
and the new delivery is looked up; the item timeline, the connectors (a source quarantine set
and lifted) and the run are opened, and a pull run started from the console whose page 3 the
fake supplier keeps failing shows that page missing; a connector's definition is shown and a
pasted sample previewed under it. A screenshot of each view is saved. Exit status 0 only when
every check holds; chromedriver is stopped (by pid) in every case.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READER = "local-reader-demo-token"  # local sample token
OPERATOR = "local-operator-demo-token"  # local sample token
PAGE2 = "demo/acme-eu/ACC-1/EXP-8821/2"
NEW_DELIVERY_ID = "EXP-8821-2-resent"
XSS_SKU = '<script>window.__feedsafe_xss=1</script><img src=x onerror="window.__feedsafe_xss=2">'
# A laptop's screen: the most common width of one, in CSS pixels.
WINDOW = (1366, 1200)


class Failed(Exception):
    pass


def http(method, url, token=None, body=None, headers=None):
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class WebDriver:
    """The few W3C WebDriver commands this test needs."""

    def __init__(self, url):
        self.url = url
        self.session = None

    def call(self, method, path, payload=None):
        body = json.dumps(payload).encode() if payload is not None else None
        status, _, data = http(method, self.url + path, body=body, headers={"content-type": "application/json"})
        value = json.loads(data or b"{}").get("value")
        if status >= 400:
            raise Failed(f"webdriver {method} {path}: {status} {value}")
        return value

    def start(self, chromium):
        options = {"args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--window-size=%d,%d" % WINDOW, "--force-device-scale-factor=1"]}
        if chromium:
            options["binary"] = chromium
        value = self.call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options,
            "goog:loggingPrefs": {"browser": "ALL"}}}})
        self.session = value["sessionId"]

    def s(self, path, method="GET", payload=None):
        return self.call(method, f"/session/{self.session}{path}", payload)

    def go(self, url):
        # A view marks itself in body[data-view] once shown: cleared first, so that a wait for
        # the next view cannot be satisfied by the one on screen.
        self.script("if (document.body) document.body.dataset.view = '';")
        self.s("/url", "POST", {"url": url})

    def script(self, source, *args):
        return self.s("/execute/sync", "POST", {"script": source, "args": list(args)})

    def find(self, css, timeout=15):
        deadline = time.time() + timeout
        while True:
            found = self.s("/elements", "POST", {"using": "css selector", "value": css})
            if found:
                return list(found[0].values())[0]
            if time.time() > deadline:
                raise Failed(f"no element {css!r} within {timeout} s")
            time.sleep(0.2)

    def click(self, element):
        self.s(f"/element/{element}/click", "POST", {})

    def type(self, element, text):
        self.s(f"/element/{element}/value", "POST", {"text": text})

    def clear(self, element):
        self.s(f"/element/{element}/clear", "POST", {})

    def text(self, element):
        return self.s(f"/element/{element}/text")

    def wait(self, source, what, timeout=20):
        deadline = time.time() + timeout
        while True:
            value = self.script(source)
            if value:
                return value
            if time.time() > deadline:
                raise Failed(f"timed out waiting for {what}")
            time.sleep(0.25)

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.s("/screenshot")))

    def browser_log(self):
        try:
            return self.s("/se/log", "POST", {"type": "browser"}) or []
        except Failed:
            return None

    def quit(self):
        if self.session:
            try:
                self.s("", "DELETE")
            except (Failed, OSError):
                pass


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def send_xss_webhook(api):
    """A signed webhook of the sample connector acme-events whose SKU is markup ending in a
    zero-width space: markup alone is a printable part number, the invisible character gets it
    refused (`invalid_row`) and quarantined, its message quoting the SKU."""
    secrets = json.load(open(os.path.join(ROOT, "infra", "local", "secrets.json")))
    secret = secrets["acme-events"][0]  # local sample secret
    key = base64.b64decode(secret[len("whsec_"):])
    event_id = f"evt-console-xss-{int(time.time() * 1000)}"
    body = json.dumps({
        "specversion": "1.0", "type": "com.acme.offers", "source": "urn:acme:events", "id": event_id,
        "time": "2026-11-29T10:00:00Z", "datacontenttype": "application/json",
        "data": {"offers": [{"sku": XSS_SKU + "\u200b", "quantity": 3, "unit": "each", "price": "1.00",
                             "currency": "EUR", "observed_at": "2026-11-29T10:00:00Z"}]},
    }, separators=(",", ":")).encode()
    stamp = str(int(time.time()))
    mac = hmac.new(key, f"msg-{event_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    status, _, answer = http("POST", api + "/v1/webhooks/acme-events", body=body, headers={
        "content-type": "application/json", "webhook-id": f"msg-{event_id}", "webhook-timestamp": stamp,
        "webhook-signature": "v1," + base64.b64encode(mac).decode()})
    if status != 202:
        raise Failed(f"the markup-SKU webhook answered {status}: {answer[:300]!r}")
    deadline = time.time() + 30
    while time.time() < deadline:
        entries = quarantine(api, "open")
        if any(XSS_SKU[:20] in e.get("message", "") for e in entries):
            return
        time.sleep(0.3)
    raise Failed("the markup-SKU webhook produced no quarantine entry quoting its SKU")


def quarantine(api, status):
    code, _, body = http("GET", f"{api}/v1/quarantine?status={status}", OPERATOR)
    if code != 200:
        raise Failed(f"GET /v1/quarantine answered {code}")
    return json.loads(body)["entries"]


CONNECTORS_SHOWN = "return document.body.dataset.view === 'connectors' && document.querySelectorAll('#view tbody tr').length >= 3"


def source_action(driver, api, connector, reason):
    """The connectors view's source quarantine button of `connector` (set or lift, whichever it
    offers), with `reason`, confirmed."""
    driver.go(api + "/console#/connectors")
    driver.wait(CONNECTORS_SHOWN, "the connectors")
    card = f"section[aria-label='Actions for {connector}']"
    driver.type(driver.find(f"{card} textarea"), reason)
    driver.click(driver.find(f"{card} form button[type=submit]"))
    driver.click(driver.find(f"{card} [role=alertdialog] button.danger"))
    driver.find(f"{card} p.ok")


UNLABELLED = """return [...document.querySelectorAll('input, select, textarea')]
  .filter(e => e.type !== 'hidden' && !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
  .map(e => e.id || e.name || e.outerHTML.slice(0, 60));"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", default="http://127.0.0.1:8790")
    parser.add_argument("--screenshots", default=os.path.join(ROOT, "target", "console-screenshots"))
    parser.add_argument("--chromedriver", default=shutil.which("chromedriver"))
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = parser.parse_args()
    if not args.chromedriver:
        sys.exit("browser test: chromedriver not found (apt-get install chromium chromium-driver)")
    os.makedirs(args.screenshots, exist_ok=True)
    for stale in ("failure.png",):
        if os.path.exists(os.path.join(args.screenshots, stale)):
            os.remove(os.path.join(args.screenshots, stale))
    api = args.api.rstrip("/")
    failures, shots = [], []

    def check(what, ok, detail=""):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}{(': ' + detail) if detail else ''}", flush=True)
        if not ok:
            failures.append(what)

    def shoot(driver, name, shows, at=None):
        """A screenshot of the view from its top, or with the element `at` in the middle."""
        path = os.path.join(args.screenshots, name)
        driver.script("""document.activeElement && document.activeElement.blur();
            const at = arguments[0] && document.querySelector(arguments[0]);
            if (at) at.scrollIntoView({block: 'center'}); else window.scrollTo(0, 0);""", at)
        driver.screenshot(path)
        shots.append((name, shows))
        # A value the page failed to render shows as a stray null, undefined or NaN.
        stray = driver.script(r"""const t = document.getElementById('view').innerText;
            return (t.match(/(^|[^A-Za-z])(null|undefined|NaN)|\[object Object\]/gm) || []);""")
        check(f"{name}: no unrendered value (null, undefined, NaN) on the page", not stray, str(stray))
        # Readable on a laptop's screen: no table runs past the window (a column behind a
        # horizontal scroll bar is a column nobody sees), nothing pushes the page sideways.
        wide = driver.script("""return [...document.querySelectorAll('#view .scroll')]
                .filter(s => s.scrollWidth > s.clientWidth + 1)
                .map(s => s.querySelector('th') ? [...s.querySelectorAll('th')].map(h => h.textContent).join('|') : 'table')
                .concat(document.documentElement.scrollWidth > window.innerWidth + 1 ? ['the page itself'] : []);""")
        check(f"{name}: every table fits the {WINDOW[0]} px window", not wide, str(wide))

    # The page and its assets: the policy, before any browser.
    for path in ("/console", "/console/console.js", "/console/console.css"):
        status, headers, _ = http("GET", api + path)
        policy = {k.lower(): v for k, v in headers.items()}.get("content-security-policy", "")
        check(f"GET {path}: 200 with a strict Content-Security-Policy",
              status == 200 and "script-src 'self'" in policy and "default-src 'none'" in policy and "unsafe" not in policy,
              f"{status}, {policy!r}")
    send_xss_webhook(api)
    page2 = next((e for e in quarantine(api, "open") if e.get("delivery_key") == PAGE2), None)
    if page2 is None:
        sys.exit(f"browser test: no open quarantine entry for {PAGE2} (run the demo first)")
    code, _, before = http("GET", f"{api}/v1/deliveries/{PAGE2}", OPERATOR)
    stored_ids = json.loads(before).get("observation_ids") if code == 200 else None

    port = free_port()
    log = open(os.path.join(args.screenshots, "chromedriver.log"), "wb")
    chromedriver = subprocess.Popen([args.chromedriver, f"--port={port}"], stdout=log, stderr=subprocess.STDOUT)
    driver = WebDriver(f"http://127.0.0.1:{port}")
    began = time.time()
    try:
        for _ in range(100):
            try:
                if http("GET", driver.url + "/status")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        driver.start(args.chromium)

        # 1. A reader's token is refused; nothing is shown.
        driver.go(api + "/console")
        token = driver.find("#token")
        check("the sign-in form is keyboard-ready: the token field has a label and the focus",
              driver.script("const t = document.getElementById('token'); return t.labels.length === 1 && document.activeElement === t;"))
        driver.type(token, READER + "\ue007")  # Enter submits
        error = driver.wait("const e = document.getElementById('login-error'); return e.textContent;", "the refusal")
        hidden = driver.script("""return ['nav', 'view'].every(id =>
            getComputedStyle(document.getElementById(id)).display === 'none');""")
        check("a reader's token is refused (403 forbidden) and no view opens", "403" in error and "forbidden" in error and hidden, error)
        shoot(driver, "01-reader-refused.png", "the sign-in form refusing a reader's token (HTTP 403 forbidden)")

        # 2. The operator's token: the quarantine queue, with the markup SKU as text.
        token = driver.find("#token")
        driver.clear(token)
        driver.type(token, OPERATOR)
        driver.click(driver.find("#login-form button[type=submit]"))
        driver.wait("return document.body.dataset.view === 'quarantine' && document.querySelectorAll('#view tbody tr').length > 0", "the queue")
        inert = driver.script("""const v = document.getElementById('view');
            return {xss: window.__feedsafe_xss === undefined, nodes: v.querySelectorAll('script, img').length,
                    literal: v.textContent.includes(arguments[0])};""", XSS_SKU[:40])
        check("a SKU holding <script> and <img onerror> renders as text: shown literally, no element made, nothing ran",
              inert == {"xss": True, "nodes": 0, "literal": True}, json.dumps(inert))
        rows = driver.script("return document.querySelectorAll('#view tbody tr').length;")
        check("the queue lists the open entries (2 demo mismatches, the markup-SKU rejection)", rows >= 3, f"{rows} rows")
        shoot(driver, "02-quarantine-queue.png", "the open quarantine queue: both demo mismatches and the markup-SKU rejection rendered as text")

        # 3. The essay's changed replay of page 2, opened with the keyboard.
        entry_link = driver.find(f'a[href="#/quarantine/{page2["quarantine_id"]}"]')
        driver.type(entry_link, "\ue007")
        driver.find("td.differs[data-side=stored]")
        cells = driver.script("""return [...document.querySelectorAll('td.differs')]
            .filter(td => td.dataset.path.endsWith('/quantity'))
            .map(td => [td.dataset.side, td.textContent, getComputedStyle(td).backgroundColor]);""")
        sides = {side: value for side, value, _ in cells}
        highlighted = all(color not in ("rgba(0, 0, 0, 0)", "transparent") for _, _, color in cells)
        check("the page-2 mismatch shows stored 6 and received 5 side by side, highlighted",
              sides == {"stored": "6", "received": "5"} and highlighted, json.dumps(cells))
        prints = driver.script("return [document.getElementById('stored-fingerprint').textContent, document.getElementById('received-fingerprint').textContent];")
        check("both fingerprints are shown, and they differ",
              all(p.startswith("json-v1:") for p in prints) and prints[0] != prints[1], " vs ".join(prints))
        check("every form control of the entry view has a label", driver.script(UNLABELLED) == [], json.dumps(driver.script(UNLABELLED)))
        shoot(driver, "03-mismatch-side-by-side.png", "the page-2 mismatch: stored 6 vs received 5 highlighted, both fingerprints, artifact links, the resolve form")

        # 4. Resolve: no reason, no decision; with one, a confirmation first, then the accept.
        driver.click(driver.find("#action-accept"))
        driver.type(driver.find("#delivery-id"), NEW_DELIVERY_ID)
        submit = driver.find("section[aria-labelledby=resolve-title] button[type=submit]")
        driver.click(submit)
        time.sleep(0.5)
        asked = driver.script("return document.querySelector('[role=alertdialog]') !== null;")
        still_open = quarantine(api, "open")
        check("without a reason nothing is asked or sent (the entry stays open)",
              not asked and any(e["quarantine_id"] == page2["quarantine_id"] for e in still_open))
        driver.type(driver.find("section[aria-labelledby=resolve-title] textarea"),
                    "Supplier confirmed page 2 was re-exported with a corrected quantity (console browser test)")
        driver.click(submit)
        dialog = driver.find("[role=alertdialog]")
        check("the confirmation names the action and the new identity", NEW_DELIVERY_ID in driver.text(dialog), driver.text(dialog))
        shoot(driver, "04-resolve-confirmation.png", "the confirmation step of an accept, with the stated delivery id and the reason",
              at="[role=alertdialog]")
        driver.click(driver.find("[role=alertdialog] button.danger"))
        outcome = driver.text(driver.find("#resolution-outcome"))
        new_key = f"demo/acme-eu/ACC-1/{NEW_DELIVERY_ID}"
        check("the entry is accepted and the new delivery named", "accepted" in outcome and new_key in outcome, outcome)

        # 5. The new delivery, looked up from the outcome's link. The accept queues the payload
        # for ingest: until the local stack has stored it, its key answers 404 (which the browser
        # logs as an error), so the link is followed once the API knows the delivery.
        deadline = time.time() + 30
        while time.time() < deadline and http("GET", f"{api}/v1/deliveries/{new_key}", OPERATOR)[0] != 200:
            time.sleep(0.5)
        driver.click(driver.find(f'#resolution-outcome a[href^="#/deliveries/"]'))
        deadline, state = time.time() + 30, None
        while time.time() < deadline:
            driver.find("#view dl.facts")
            state = driver.script("return document.querySelector('#view dl.facts dd').textContent;")
            if state == "COMMITTED":
                break
            time.sleep(0.5)
            driver.script("window.dispatchEvent(new HashChangeEvent('hashchange'));")
        check("the new delivery is committed under the operator's identity", state == "COMMITTED", str(state))
        shoot(driver, "05-new-delivery.png", "the accepted payload's new delivery: committed, identity basis operator, its observation and raw artifact")
        code, _, after = http("GET", f"{api}/v1/deliveries/{PAGE2}", OPERATOR)
        check("the original page-2 delivery keeps its observation", code == 200 and json.loads(after).get("observation_ids") == stored_ids)
        code, _, entry = http("GET", f"{api}/v1/quarantine/{page2['quarantine_id']}", OPERATOR)
        history = [e["action"] for e in json.loads(entry).get("resolutions", [])] if code == 200 else []
        check("the entry's append-only history records the request and the accept", history == ["accept_requested", "accepted"], str(history))

        # 6. Connectors: quarantine the webhook source from the console.
        source_action(driver, api, "acme-events", "Supplier reported a clock fault (console browser test)")
        code, _, body = http("GET", f"{api}/v1/source-quarantines/acme-events", OPERATOR)
        check("a source quarantine set from the console is in force", code == 200 and json.loads(body)["active"] is True)

        # 7. The item timeline: current offers marked, the quarantined source and payloads apart.
        driver.go(api + "/console#/items/AX-440-R2")
        driver.wait("return document.body.dataset.view === 'items' && document.querySelector('svg.chart') !== null", "the timeline")
        marks = driver.script("""const c = s => document.querySelectorAll('svg.chart:first-of-type ' + s).length;
            return {current: c('circle.pt.current'), source_quarantined: c('circle.pt.source-quarantined'),
                    earlier: c('circle.pt.earlier'), quarantined: c('rect.pt.quarantined'), lag: c('line.lag')};""")
        check("the timeline marks the current offer, the quarantined source's claim, earlier claims, the refused payloads and each claim's retrieval lag",
              marks["current"] >= 1 and marks["source_quarantined"] >= 1 and marks["earlier"] >= 1
              and marks["quarantined"] >= 1 and marks["lag"] >= 4, json.dumps(marks))
        # Each lag label is drawn whole, inside its chart (a point at the right edge is labelled
        # to its left): the labels' boxes against the charts' view boxes.
        cut = driver.script("""return [...document.querySelectorAll('svg.chart')].flatMap(g => {
                const w = g.viewBox.baseVal.width;
                return [...g.querySelectorAll('text.lag-label')].map(t => t.getBBox())
                    .filter(b => b.x < 0 || b.x + b.width > w).map(b => [Math.round(b.x), Math.round(b.x + b.width), w]); });""")
        check("every retrieval-lag label is inside its chart, none cut off", cut == [], json.dumps(cut))
        current = driver.script("return [...document.querySelectorAll('#view tr.current td:nth-child(4)')].map(td => td.textContent);")
        check("the current offer in the table is acme-eu's quantity 4", current == ["4"], str(current))
        shoot(driver, "06-item-timeline.png", "AX-440-R2's timeline: quantity and price over observed_at, current offer ringed, lag lines, the quarantined source and refused payloads")

        # 8. Lift the source quarantine again, from the connectors view.
        source_action(driver, api, "acme-events", "Clock fixed (console browser test)")
        code, _, body = http("GET", f"{api}/v1/source-quarantines/acme-events", OPERATOR)
        check("the source quarantine lifted from the console is no longer in force", code == 200 and json.loads(body)["active"] is False)
        driver.go(api + "/console#/connectors?after-lift")
        driver.wait(CONNECTORS_SHOWN, "the connectors")
        fresh = driver.script("return [...document.querySelectorAll('#view tbody tr')].map(r => r.textContent).join(' | ');")
        check("the connectors view shows acme-eu's freshness and last delivery", "acme-eu" in fresh and "EXP-8822" in fresh, fresh[:200])
        check("every form control of the connectors view has a label", driver.script(UNLABELLED) == [], json.dumps(driver.script(UNLABELLED)))
        shoot(driver, "07-connectors.png", "the connectors: last delivery, freshness, open quarantines, source quarantine state and actions")

        # 9. The run of EXP-8821.
        driver.go(api + "/console#/runs/run-acme-eu.EXP-8821")
        driver.wait("return document.body.dataset.view === 'runs' && document.querySelectorAll('#view tbody tr').length === 3", "the run's pages")
        pages = driver.script("return [...document.querySelectorAll('#view tbody tr')].map(r => r.textContent);")
        check("the run lists its 3 pages, all committed", pages == ["1committed", "2committed", "3committed"], str(pages))

        # 10. A run started from the console whose page 3 the supplier keeps failing: missing.
        supplier = json.load(open(os.path.join(ROOT, ".local", "stack.json")))["fake_supplier"]
        export = [[{"sku": f"CONSOLE-{n}", "quantity": n, "unit": "each", "price": "1.00", "currency": "EUR",
                    "observed_at": "2026-11-29T11:00:00Z"}] for n in (1, 2, 3)]
        for path, body in (("export", {"export_id": "EXP-9001", "pages": export}), ("fail", {"page": 3, "times": 1000})):
            status, _, answer = http("POST", f"{supplier}/control/acme-eu/{path}", body=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
            if status >= 300:
                raise Failed(f"the fake supplier refused {path}: {status} {answer[:200]!r}")
        driver.go(api + "/console#/connectors")
        driver.wait(CONNECTORS_SHOWN, "the connectors")
        pull = "section[aria-label='Actions for acme-eu'] form:nth-of-type(2)"
        check("starting a pull run asks for no reason (nothing records one) but for a confirmation",
              driver.script(f"return document.querySelector(\"{pull} textarea\") === null;"))
        driver.click(driver.find(f"{pull} button[type=submit]"))
        driver.click(driver.find(f"{pull} [role=alertdialog] button.danger"))
        driver.click(driver.find(f'{pull} p.ok a[href^="#/runs/"]'))
        deadline, states = time.time() + 60, None
        while time.time() < deadline:
            driver.wait("return document.body.dataset.view === 'runs' && document.querySelector('#view tbody tr') !== null", "the new run")
            states = driver.script("""return [...document.querySelectorAll('#view tbody tr')]
                .map(r => [r.cells[0].textContent, r.cells[1].textContent, r.cells[1].classList.contains('missing')]);""")
            if states[:2] == [["1", "committed", False], ["2", "committed", False]]:
                break
            time.sleep(0.5)
            driver.script("document.body.dataset.view = ''; window.dispatchEvent(new HashChangeEvent('hashchange'));")
        check("a run started from the console (export EXP-9001, page 3 failing at the supplier) shows page 3 missing, highlighted",
              states == [["1", "committed", False], ["2", "committed", False], ["3", "missing", True]], json.dumps(states))
        shoot(driver, "08-run-missing-page.png", "run run-acme-eu.EXP-9001, started from the console: pages 1-2 committed, page 3 missing (highlighted), the re-run action")
        # 11. The delivery lookup of page 2.
        driver.go(api + "/console#/deliveries/" + PAGE2)
        driver.wait("return document.body.dataset.view === 'deliveries' && document.querySelector('#view dl.facts') !== null", "the delivery")
        shoot(driver, "09-delivery.png", "delivery demo/acme-eu/ACC-1/EXP-8821/2: state, attempts, epoch, artifact, observations, its quarantine entry")

        # 12. A seeded connector's definition and versions, and a pasted sample previewed.
        driver.go(api + "/console#/connectors/snapshot-hooks")
        driver.wait("return document.body.dataset.view === 'connectors' && document.querySelector('#view pre.definition') !== null", "the definition")
        shown_definition = driver.text(driver.find("#view pre.definition"))
        check("the connector view shows the stored definition as sent", '"snapshot_id"' in shown_definition, shown_definition[:200])
        sample = open(os.path.join(ROOT, "tests", "fixtures", "suppliers", "snapshot-webhooks", "snapshot-8812.json")).read()
        driver.type(driver.find("#preview-sample"), sample)
        driver.click(driver.find("#view form.stack button[type=submit]"))
        driver.wait("return (document.querySelector('#preview-result') || {}).textContent.includes('LM358DR')", "the preview's rows")
        previewed = driver.text(driver.find("#preview-result"))
        check("the preview form shows the sample's rows and its snapshot identity", "1200" in previewed and "SNAP-8812" in previewed, previewed[:300])
        check("every form control of the connector view has a label", driver.script(UNLABELLED) == [], json.dumps(driver.script(UNLABELLED)))
        shoot(driver, "10-connector-preview.png", "connector snapshot-hooks: its definition, versions and a pasted sample previewed")

        log_entries = driver.browser_log()
        if log_entries is None:
            print("  (chromedriver gave no browser log: the no-console-errors check is skipped)")
        else:
            # The refused sign-in's 403 is the one error this walk-through causes on purpose.
            errors = [e.get("message", "") for e in log_entries if e.get("level") == "SEVERE"
                      and "/v1/quarantine?status=open - Failed to load resource: the server responded with a status of 403" not in e.get("message", "")]
            check("no error in the browser console (a Content-Security-Policy violation would be one)", not errors, "; ".join(errors)[:500])
    except Failed as e:
        check(str(e), False)
        try:
            driver.screenshot(os.path.join(args.screenshots, "failure.png"))
            print(f"  (the page at the failure: {os.path.join(args.screenshots, 'failure.png')})")
        except (Failed, OSError):
            pass
    finally:
        driver.quit()
        chromedriver.terminate()
        try:
            chromedriver.wait(timeout=10)
        except subprocess.TimeoutExpired:
            chromedriver.kill()
        log.close()
    print(f"  screenshots in {os.path.relpath(args.screenshots, ROOT)}:")
    for name, shows in shots:
        print(f"    {name}: {shows}")
    if failures:
        sys.exit(f"browser test: {len(failures)} check(s) failed in {time.time() - began:.0f} s")
    print(f"browser test: passed in {time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
