"""Drives headless Chromium for the obsctl web tests (Tests/ObsctlTests/EndToEnd/WebTests.swift).

One JSON command per line on stdin, one JSON answer per line on stdout, so that the tests, in
Swift, hold the scenario and the assertions and this stays a thin remote control:

  {"do": "open", "url": U}                    navigate and wait for the load event
  {"do": "eval", "js": S}                     run S (a function body) and answer what it returns
  {"do": "wait", "js": S, "timeout": T}       run S until it returns something truthy; answer it,
                                              or an error after T seconds
  {"do": "click", "css": C}                   click the first element matching C
  {"do": "type", "css": C, "text": S}         clear the element and type S into it
  {"do": "clear_cookies"}
  {"do": "all_cookies"}                       every cookie the browser holds, for any site
  {"do": "screenshot", "path": P}             write a PNG of the window

Answers: {"ok": true, "value": ...} or {"ok": false, "error": "..."}. At the end of its input it
closes Chromium and exits. Debian's python3-selenium
is importable from /usr/bin/python3; Chromium and its driver come from Debian too.
"""
import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def start():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,800", "--hide-scrollbars", "--force-device-scale-factor=1", "--no-proxy-server"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    # The page's own size (the window's includes no browser frame in headless mode, but be exact).
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    return driver


def run(driver, command):
    what = command["do"]
    if what == "open":
        driver.get(command["url"])
        return None
    if what == "eval":
        return driver.execute_script(command["js"])
    if what == "wait":
        deadline = time.monotonic() + command.get("timeout", 10)
        while True:
            value = driver.execute_script(command["js"])
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError("still false after %ss: %s" % (command.get("timeout", 10), command["js"]))
            time.sleep(0.02)
    if what == "click":
        driver.find_element(By.CSS_SELECTOR, command["css"]).click()
        return None
    if what == "type":
        element = driver.find_element(By.CSS_SELECTOR, command["css"])
        element.clear()
        element.send_keys(command["text"])
        return None
    if what == "clear_cookies":
        driver.delete_all_cookies()
        return None
    if what == "all_cookies":
        return driver.execute_cdp_cmd("Network.getAllCookies", {})["cookies"]
    if what == "screenshot":
        return driver.save_screenshot(command["path"])
    raise ValueError("unknown command %r" % what)


def main():
    driver = start()
    print(json.dumps({"ok": True, "value": "ready"}), flush=True)
    try:
        for line in sys.stdin:
            command = json.loads(line)
            try:
                answer = {"ok": True, "value": run(driver, command)}
            except Exception as error:  # every failure goes back to the test as an answer
                answer = {"ok": False, "error": "%s: %s" % (type(error).__name__, error)}
            print(json.dumps(answer), flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
