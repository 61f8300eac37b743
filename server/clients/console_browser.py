"""The server's console in a real browser: Debian's Chromium, headless, driven by Selenium,
against the server at DATASTORE_EMULATOR_HOST. Entities are written and read back through
Google's Python client; the browser opens each page, saves an edit (the rest of the entity
unchanged), deletes an entity, runs a GQL query with a binding and a malformed one, shows a
value holding markup as text, exports the project from the console and follows its progress,
and a page from another origin tries to write (refused).

    python console_browser.py PROJECT [SCREENSHOT_DIR]

Prints "ok" when every check passed. With SCREENSHOT_DIR (or $CONSOLE_SCREENSHOTS), saves a
PNG of each page there (the README's).
"""

import http.server
import os
import shutil
import sys
import tempfile
import threading

from google.cloud import datastore
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

# A click that submits a form returns before the next page replaces this one: an element read
# meanwhile can belong to the page being left, so a wait reads again.
RETRIED = (NoSuchElementException, StaleElementReferenceException)

MARKUP = "<script>document.title='owned'</script><b>bold?</b>"


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1200,760"):
        options.add_argument(argument)
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)


def main(project, shots):
    base = "http://" + os.environ["DATASTORE_EMULATOR_HOST"]
    client = datastore.Client(project=project)
    key = client.key("Task", "t1")
    first = datastore.Entity(key, exclude_from_indexes=("notes",))
    first.update({"title": MARKUP, "priority": 2, "notes": "keep me",
                  "tags": ["a", "b"], "done": False})
    client.put(first)
    for i in range(2, 7):
        other = datastore.Entity(client.key("Task", "t%d" % i))
        other.update({"title": "task %d" % i, "priority": i % 3, "notes": "", "tags": [],
                      "done": i % 2 == 0})
        client.put(other)

    driver = browser()
    wait = WebDriverWait(driver, 10, ignored_exceptions=RETRIED)

    def shot(name):
        if shots:
            driver.save_screenshot(os.path.join(shots, "console-%s.png" % name))

    def text():
        return driver.find_element(By.TAG_NAME, "main").text

    def shown(predicate, timeout=10):
        """The page's text once `predicate` holds of it, read again while a page replaces
        another."""
        seen = []

        def check(_):
            seen[:] = [text()]
            return predicate(seen[0])

        WebDriverWait(driver, timeout, ignored_exceptions=RETRIED).until(check)
        return seen[0]

    try:
        driver.get(base + "/console")
        assert project in text(), text()
        shot("projects")

        driver.find_element(By.LINK_TEXT, project).click()
        wait.until(lambda d: "Task" in text())
        rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "tbody tr")]
        assert "Task 6" in rows, rows
        shot("project")

        driver.find_element(By.LINK_TEXT, "Task").click()
        wait.until(lambda d: "in key order" in text())
        assert len(driver.find_elements(By.CSS_SELECTOR, "tbody tr")) == 6
        # Markup in a value is text: shown as written, never run.
        assert MARKUP[:40] in text(), text()
        assert driver.title != "owned" and not driver.find_elements(By.CSS_SELECTOR, "td b")
        shot("kind")

        driver.find_element(By.LINK_TEXT, "Task:'t1'").click()
        wait.until(lambda d: d.find_elements(By.NAME, "v:priority"))
        shot("entity")
        key_param = driver.find_element(By.NAME, "key").get_attribute("value")
        field = driver.find_element(By.NAME, "v:priority")
        field.clear()
        field.send_keys("7")
        driver.find_element(By.CSS_SELECTOR, "form.entity button[type=submit]").click()
        wait.until(lambda d: "Saved." in text())
        saved = client.get(key)
        assert saved["priority"] == 7, saved
        assert saved["title"] == MARKUP and saved["notes"] == "keep me", saved
        assert saved["tags"] == ["a", "b"] and saved["done"] is False, saved
        assert "notes" in saved.exclude_from_indexes, saved.exclude_from_indexes

        driver.get(base + "/console/%s/query" % project)
        driver.find_element(By.NAME, "gql").send_keys("SELECT * FROM Task WHERE priority = @p")
        driver.find_element(By.NAME, "bindings").send_keys("p = 1")
        driver.find_element(By.CSS_SELECTOR, "form.query button[type=submit]").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "table"))
        expected = len(list(client.query(kind="Task", filters=[("priority", "=", 1)]).fetch()))
        assert expected > 0
        assert len(driver.find_elements(By.CSS_SELECTOR, "tbody tr")) == expected
        shot("query")

        gql = driver.find_element(By.NAME, "gql")
        gql.clear()
        gql.send_keys("SELECT * FRM Task")
        driver.find_element(By.CSS_SELECTOR, "form.query button[type=submit]").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".error"))
        error = driver.find_element(By.CSS_SELECTOR, ".error").text
        assert "1:10" in error, error

        victim = client.key("Task", "t2")
        driver.get(base + "/console/%s/entity?key=%s" % (project, _key_param(driver, base, project, "t2")))
        driver.find_element(By.PARTIAL_LINK_TEXT, "Delete this entity").click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "button.danger")).click()
        wait.until(lambda d: "in key order" in text())
        assert client.get(victim) is None

        # An export from the console, its progress on a page that reloads itself.
        folder = tempfile.mkdtemp(prefix="console-export-")
        driver.get(base + "/console/%s/transfer" % project)
        driver.find_element(By.CSS_SELECTOR, "form[action$='/transfer/export'] input[name=path]").send_keys(folder)
        driver.find_element(By.CSS_SELECTOR, "form[action$='/transfer/export'] button").click()
        progress = shown(lambda t: "done:" in t, timeout=30)
        assert "5 entities" in progress, progress
        shot("transfer")
        written = [f for _, _, files in os.walk(folder) for f in files]
        assert any(f.endswith(".overall_export_metadata") for f in written), written
        shutil.rmtree(folder, ignore_errors=True)

        # A page on another origin posts the edit form (with the key it learned): refused.
        attack = _serve_attack(base, project, key_param)
        driver.get(attack)
        wait.until(lambda d: "Refused" in d.page_source or "forbidden" in d.page_source.lower())
        assert client.get(key)["priority"] == 7
    except Exception:
        # What the browser showed, for the failure's report.
        print("at %s:\n%s" % (driver.current_url, driver.page_source[:3000]))
        raise
    finally:
        driver.quit()
    print("ok")


def _key_param(driver, base, project, name):
    """The console's link parameter of Task `name`, read off the kind's page."""
    driver.get(base + "/console/%s/kinds/Task" % project)
    href = driver.find_element(By.LINK_TEXT, "Task:'%s'" % name).get_attribute("href")
    return href.split("key=", 1)[1]


def _serve_attack(base, project, key_param):
    """Serves, on another port, a page that submits the console's form as soon as it loads."""
    page = """<!doctype html><html><body>
<form id="f" method="post" action="%s/console/%s/entity">
<input name="token" value="guessed"><input name="key" value="%s">
<input name="t:priority" value="integer"><input name="v:priority" value="666">
<input name="i:priority" value="on"></form>
<script>document.getElementById('f').submit()</script></body></html>""" % (base, project, key_param)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return "http://127.0.0.1:%d/" % server.server_address[1]


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else os.environ.get("CONSOLE_SCREENSHOTS"))
