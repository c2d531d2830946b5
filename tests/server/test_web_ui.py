#!/usr/bin/env python3
"""The web page at / of `qevict serve`, driven in headless Chromium (Selenium + chromedriver).

Starts the server with an API key, opens the page (which must ask for the key), loads a
document of a few hundred tokens from a text file through the page's file input, asks two questions under qevict at budget 0.2, and checks
that both answers stream in, that the tier strip shows every window of the kept conversation
with windows demoted or evicted, and that the strip changes between the turns. Saves a
screenshot (--screenshot). Exits non-zero on any failure, including a missing Chromium.
Usage: test_web_ui.py --binary build/qevict --model models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_server import ServerProcess  # noqa: E402

API_KEY = "web-ui-test-key"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# About 400 tokens of made-up facts the questions ask about.
DOCUMENT = """The Harbour Museum of Lindqvist opened in 1911 in a former customs warehouse on
the north quay. Its first director, Agnes Morrow, collected ship models, navigation instruments
and the logbooks of the whaling fleet that sailed from Lindqvist until 1932. The museum's most
famous object is the Grey Heron, a twelve-metre fishing boat built in 1887 by the shipwright
Tomas Berg, which was lifted into the main hall through the roof in 1954.

In 1968 a fire destroyed the east wing, where the library of charts was kept. Around four
hundred charts were lost, but the logbooks survived because they had been moved to the
basement for cataloguing a week earlier. The east wing was rebuilt in 1971 with a copper roof,
which has since turned green and gives the museum its nickname, the Green House.

The museum is open every day except Monday, from ten in the morning until five in the
afternoon. Entry costs eight crowns for adults; children under twelve enter free. On the first
Sunday of each month a volunteer demonstrates knot tying on the quay, and in August the museum
holds a regatta of model boats in the old dry dock. The current director, Henrik Aas, took
office in 2015 and started a project to digitise the logbooks, which is expected to finish in
2027. The museum cafe serves fish soup, rye bread and a cinnamon bun named after Agnes Morrow.

The collection also holds a brass telescope that belonged to Captain Elise Varga, the first
woman to command a ship of the whaling fleet, and a clock from the old customs office that
still strikes every hour. Visitors can climb the tower of the warehouse, one hundred and twelve
steps, for a view of the harbour and the lighthouse on Skarv Island."""
DOCUMENT = re.sub(r"(?<!\n)\n(?!\n)", " ", DOCUMENT)  # paragraphs without hard line breaks
QUESTIONS = ["Who built the Grey Heron, and in which year?",
             "What destroyed the east wing, and what was lost in it?"]


def fail(message):
    print("FAIL " + message)
    sys.exit(1)


def new_driver():
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            fail("no %s: install Debian's %s (scripts/setup.sh packages)" % (path, package))
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        fail("no selenium in the project's .venv (scripts/setup.sh venv)")
    # Debian's browser and driver, given by path: Selenium's driver manager must never look
    # for (or download) others.
    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--hide-scrollbars", "--force-device-scale-factor=1"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def wait_for(driver, predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        error = driver.find_element("id", "error")
        if error.is_displayed() and error.text:
            fail("the page shows an error while waiting for %s: %s" % (what, error.text))
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    fail("timed out after %d s waiting for %s" % (timeout, what))


def get_json(srv, path, key):
    req = urllib.request.Request(srv.url(path), headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def ask(driver, question, turn):
    box = driver.find_element("id", "question")
    box.send_keys(question)
    driver.find_element("id", "send").click()
    wait_for(driver, lambda: driver.find_element("id", "strip").get_attribute("data-turn") ==
             str(turn), 120, "turn %d's answer and cache picture" % turn)
    answers = driver.find_elements("css selector", ".msg.assistant")
    if len(answers) != turn:
        fail("%d answers on the page after turn %d" % (len(answers), turn))
    answer = answers[-1]
    if answer.get_attribute("data-state") != "done":
        fail("turn %d's answer is in state %s" % (turn, answer.get_attribute("data-state")))
    text = answer.find_element("css selector", ".text").text.strip()
    if not text:
        fail("turn %d's answer is empty" % turn)
    strip = driver.find_element("id", "strip")
    cells = strip.find_elements("css selector", ".cell[data-window]")
    return text, strip.get_attribute("data-signature").split("|"), len(cells)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--screenshot", help="save the page after the second turn here (PNG)")
    args = parser.parse_args()

    driver = new_driver()  # before the server: a missing browser fails at once
    from selenium.webdriver.support.ui import Select  # there since new_driver imported selenium
    srv = ServerProcess(args.binary, args.model, "--slots", "1", "-t", "2", "--api-key", API_KEY,
                        "-v")
    try:
        driver.get(srv.url("/"))
        # The page needs the key for /props: it must ask for it.
        wait_for(driver, lambda: driver.find_element("id", "key-dialog").is_displayed(), 20,
                 "the API key dialog")
        driver.find_element("id", "key-input").send_keys(API_KEY)
        driver.find_element("id", "key-save").click()
        wait_for(driver, lambda: len(driver.find_elements(
            "css selector", "#policy option")) > 1, 20, "the policies from /props")
        # The document comes as a text file through the page's file input.
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(DOCUMENT)
        try:
            driver.find_element("id", "doc-file").send_keys(f.name)
            wait_for(driver, lambda: driver.find_element("id", "document").get_property(
                "value") == DOCUMENT, 10, "the document loaded from the file")
        finally:
            os.unlink(f.name)
        Select(driver.find_element("id", "policy")).select_by_value("qevict")
        for field, value in (("budget", "0.2"), ("max-tokens", "48")):
            box = driver.find_element("id", field)
            box.clear()
            box.send_keys(value)

        answer1, tiers1, cells1 = ask(driver, QUESTIONS[0], 1)
        print("turn 1: %d windows, answer: %s" % (cells1, answer1[:100].replace("\n", " ")))
        if cells1 < 20:
            fail("turn 1's strip has %d windows for a ~500-token conversation" % cells1)
        if not any(c in layer for layer in tiers1 for c in "12"):
            fail("at budget 0.2 no window was demoted or evicted after turn 1")
        session = driver.execute_script("return state.sessionId")
        report = get_json(srv, "/v1/sessions/%s/cache" % session, API_KEY)
        if len(report["tiers"]["windows"]) != cells1 or report["policy"] != "qevict":
            fail("the page shows %d windows, the endpoint %d (policy %s)" %
                 (cells1, len(report["tiers"]["windows"]), report["policy"]))

        answer2, tiers2, cells2 = ask(driver, QUESTIONS[1], 2)
        print("turn 2: %d windows, answer: %s" % (cells2, answer2[:100].replace("\n", " ")))
        if cells2 <= cells1:
            fail("the strip did not grow with the conversation: %d then %d windows" %
                 (cells1, cells2))
        # The windows of turn 1 were routed again under the second question: some of them now
        # sit in another tier in some layer.
        changed = sum(1 for before, after in zip(tiers1, tiers2)
                      for a, b in zip(before, after) if a != b)
        if changed == 0:
            fail("no window of turn 1 changed tier in any layer after turn 2")
        promoted = int(driver.find_element("id", "strip").get_attribute("data-promoted"))
        print("turn 2: %d (layer, window) tiers changed, %d windows promoted" %
              (changed, promoted))
        rows = driver.find_elements("css selector", "#turns tbody tr")
        if len(rows) != 2:
            fail("%d rows in the turns table" % len(rows))
        cached = int(rows[1].find_elements("css selector", "td")[2].text)
        if cached <= 0:
            fail("the second turn did not continue the kept conversation (cached %d)" % cached)
        bytes_text = driver.find_element("id", "bytes").text
        for label in ("resident", "reserved", "on disk", "server process RSS", "budget"):
            if label not in bytes_text:
                fail("the bytes table lacks '%s': %s" % (label, bytes_text))
        # One layer: each cell takes that layer's tier, as the endpoint's by_layer has it.
        Select(driver.find_element("id", "layer-select")).select_by_value("0")
        shown = "".join(
            "0" if "fp16" in c else "1" if "quant" in c else "2" if "evicted" in c else "?"
            for c in (cell.get_attribute("class") for cell in driver.find_elements(
                "css selector", "#strip .cell[data-window]")))
        if shown != tiers2[0]:
            fail("layer 0 shows %s, the endpoint says %s" % (shown, tiers2[0]))
        Select(driver.find_element("id", "layer-select")).select_by_value("all")
        if args.screenshot:
            driver.execute_script("document.activeElement.blur()")
            driver.save_screenshot(args.screenshot)
            print("screenshot: %s" % args.screenshot)
        log = srv.stderr()
        lines = [l for l in log.splitlines()
                 if l.startswith("qevict serve: request POST /v1/chat/completions 200 ")]
        if len(lines) != 2 or "policy=qevict" not in lines[1]:
            fail("the server logged %d chat requests: %s" % (len(lines), lines))
    finally:
        driver.quit()
        rc = srv.stop()
    if rc != 0:
        fail("server exit code %d: %s" % (rc, srv.stderr()[-2000:]))
    srv.remove_log()
    print("ok   web page: two turns streamed, tier strip changed between them")


if __name__ == "__main__":
    main()
