#!/usr/bin/python3
"""The synthetic report's HTML page as a browser reads it: headless Chromium through Selenium
opens the file and, from its own DOM and logs, finds the verdict, every image decoded
(naturalWidth > 0), no console error, and no request but the page's own file and data: URLs.
It saves a screenshot (--screenshot PATH; default a temporary folder, named in the output).

  test_html_browser.py [--screenshot PATH] [--ranks 4096] [--nodes 512] [--report REPORT]

Exit 0 when every check holds, 1 when one fails or when chromium, chromium-driver or
python3-selenium is missing (scripts/setup.sh installs them). TRAINPROOF_BIN, when set, puts the text summary on the page."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VIZ = os.path.join(ROOT, "viz", "trainproof_viz.py")
SYNTHETIC = os.path.join(ROOT, "tests", "viz", "synthetic_run.py")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def browser_or_fail():
    """The selenium module, or None after saying which package is missing."""
    missing = [package for path, package in ((CHROMIUM, "chromium"),
                                             (CHROMEDRIVER, "chromium-driver"))
               if not os.path.exists(path)]
    try:
        import selenium.webdriver as webdriver
    except ImportError:
        webdriver = None
        missing.append("python3-selenium")
    if missing:
        # scripts/setup.sh installs them: a machine without them is a missing install step.
        print(f"FAIL: {', '.join(missing)} not installed "
              f"(apt-get install {' '.join(missing)}; scripts/setup.sh does)")
        return None
    return webdriver


def start_driver(webdriver):
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,2400"):
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def write_page(folder, ranks, nodes, report=None):
    """The page of `report`, or of a synthetic run of `ranks` on `nodes` when none is given."""
    if report is None:
        subprocess.run([sys.executable, SYNTHETIC, folder, "--ranks", str(ranks), "--nodes",
                        str(nodes)], check=True, capture_output=True)
        report = os.path.join(folder, "synthetic.json")
    page = os.path.join(folder, "page.html")
    binary = os.environ.get("TRAINPROOF_BIN")
    subprocess.run([sys.executable, VIZ, "html", report, "--out", page,
                    *(["--trainproof", binary] if binary else [])],
                   check=True, capture_output=True, timeout=300)
    with open(report) as f:
        return page, json.load(f)


def requested_urls(driver):
    """Every URL the page asked for, from the DevTools log."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def check_page(driver, page, report, failed):
    url = "file://" + os.path.abspath(page)
    driver.get(url)
    verdict = driver.execute_script(
        "const v = document.querySelector('.verdict'); return v ? v.textContent : null;")
    if verdict != report["verdict"]:
        failed.append(f"the page's verdict is {verdict!r}, not {report['verdict']!r}")
    images = driver.execute_script(
        "return Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth]);")
    if not images:
        failed.append("the page has no image")
    for alt, complete, width in images:
        if not complete or width <= 0:
            failed.append(f"image {alt} did not decode (complete {complete}, width {width})")
    names = driver.execute_script(
        "return Array.from(document.querySelectorAll('table tr td:first-child'))"
        ".map(td => td.textContent);")
    for check in report["gate"]["checks"]:
        if check["name"] not in names:
            failed.append(f"check {check['name']} is not in the page's tables")
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    for error in errors:
        failed.append(f"console error: {error.get('message')}")
    for requested in requested_urls(driver):
        if requested != url and not requested.startswith("data:"):
            failed.append(f"the page requested {requested[:120]}")
    return len(images)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--screenshot", help="where to save the screenshot (PNG)")
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--report", help="a real report to open the page of, in place of the "
                                         "synthetic run")
    args = parser.parse_args()
    webdriver = browser_or_fail()
    if webdriver is None:
        return 1
    folder = tempfile.mkdtemp(prefix="test-html-browser-")
    # The screenshot outlives the run's data (a 4,096-rank trace is tens of MB).
    screenshot = args.screenshot or os.path.join(
        tempfile.mkdtemp(prefix="trainproof-screenshot-"), "synthetic.png")
    driver, failed = None, []
    try:
        page, report = write_page(folder, args.ranks, args.nodes, args.report)
        driver = start_driver(webdriver)
        driver.set_window_size(1400, 2400)
        images = check_page(driver, page, report, failed)
        if not driver.save_screenshot(screenshot):
            failed.append(f"no screenshot saved at {screenshot}")
        print(f"{page}: verdict {report['verdict']}, {images} images decoded; "
              f"screenshot {screenshot}")
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(folder, ignore_errors=True)
    for failure in failed:
        print(f"FAIL: {failure}")
    print("ok" if not failed else f"{len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
