#!/usr/bin/env python3
"""Drive headless Chromium (Debian's chromium and chromium-driver) through the cluster's web pages and write what it
saw as JSON, with a screenshot per page. Run inside the network namespace of the host that serves the pages (the
pages listen on its loopback, as a user reaches them through an SSH tunnel): tests/sandbox/browser runs it with
nsenter into the scheduler host's namespace.

    drive.py --out DIR --dashboard http://127.0.0.1:8787 [--lab http://127.0.0.1:8888 --token-file F --notebook P]

--pages picks the dashboard pages (default status,workers,system); --bokeh-facts also records, per page, what the
plots draw into their canvases (the Bokeh document's titles, the GPU plots' data sources and ranges, read through
BokehJS), whether the page's text names the GPU and links the GPU page; --chromium and --chromedriver run a browser
unpacked elsewhere than /usr/bin (tests/gpu/gpu-proof-dashboard.sh on a GPU machine).
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

# Bokeh 3 draws inside shadow roots: canvases are counted through them.
CANVASES = """
function count(root) {
  let n = 0;
  for (const el of root.querySelectorAll('*')) {
    if (el.tagName === 'CANVAS' && el.width > 0 && el.height > 0) n++;
    if (el.shadowRoot) n += count(el.shadowRoot);
  }
  return n;
}
return {canvases: count(document), bokeh: !!(window.Bokeh && window.Bokeh.documents && window.Bokeh.documents.length),
        title: document.title};
"""
# What the plots draw in their canvases, read from BokehJS's documents: every title's text, the data sources that hold
# the dashboard's GPU columns (distributed.dashboard.components.nvml), and the named plots' x ranges.
BOKEH_FACTS = """
const columns = ['worker', 'gpu-index', 'memory', 'memory_text', 'utilization'];
const facts = {titles: [], sources: [], plots: []};
const plain = (v) => (typeof v === 'number' || typeof v === 'string') ? v : String(v);
for (const doc of (window.Bokeh && window.Bokeh.documents) || []) {
  const all = doc._all_models;
  const models = all instanceof Map ? Array.from(all.values()) : Array.from(doc.all_models || []);
  for (const m of models) {
    const type = m.type || (m.constructor && m.constructor.__name__);
    if (type === 'Title' && m.text) facts.titles.push(m.text);
    if (type === 'ColumnDataSource' && m.data) {
      const data = m.data instanceof Map ? Object.fromEntries(m.data) : m.data;
      if ('gpu-index' in data || 'memory_text' in data) {
        const kept = {};
        for (const c of columns) if (c in data) kept[c] = Array.from(data[c]).slice(0, 16).map(plain);
        facts.sources.push(kept);
      }
    }
    if (m.name && m.x_range && String(m.name).includes('gpu'))
      facts.plots.push({name: m.name, x_start: m.x_range.start, x_end: m.x_range.end});
  }
}
const text = document.body ? document.body.innerText : '';
facts.text_mentions_gpu = /\\bgpu\\b/i.test(text);
const link = document.querySelector('a[href$="gpu"]');
facts.gpu_page_link = link ? {href: link.getAttribute('href'), text: link.innerText} : null;
return facts;
"""
DASHBOARD_PAGES = ("status", "workers", "system")


def browser(chromium: str = "/usr/bin/chromium", chromedriver: str = "/usr/bin/chromedriver") -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1600,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as error:  # noqa: BLE001 - the page is still loading
            last = error
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


def plotted(state: dict[str, Any]) -> dict[str, Any] | None:
    return state if state["canvases"] > 0 and state["bokeh"] else None


def dashboard(driver: webdriver.Chrome, base: str, out: Path, pages: tuple[str, ...] = DASHBOARD_PAGES,
              facts: bool = False) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for page in pages:
        started = time.monotonic()
        driver.get(f"{base}/{page}")
        try:
            state = wait(f"dashboard /{page} plots", lambda: plotted(driver.execute_script(CANVASES)), 60)
        except TimeoutError as error:
            state = {"error": str(error), **driver.execute_script(CANVASES)}
        time.sleep(2)  # a couple of the dashboard's updates
        state.update(driver.execute_script(CANVASES), seconds=round(time.monotonic() - started, 1))
        if facts:
            state["bokeh_facts"] = driver.execute_script(BOKEH_FACTS)
        driver.save_screenshot(str(out / f"dashboard-{page}.png"))
        found[page] = state
    return found


def lab(driver: webdriver.Chrome, base: str, token: str, notebook: str, expect: str, out: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    started = time.monotonic()
    driver.get(f"{base}/lab")
    field = wait("the login page's token field", lambda: driver.find_element(By.CSS_SELECTOR, "input[type=password]"),
                 60)
    found["login_page"] = driver.title
    driver.save_screenshot(str(out / "lab-login.png"))
    field.send_keys(token + Keys.ENTER)
    wait("JupyterLab's shell", lambda: driver.find_element(By.CSS_SELECTOR, "#jp-main-dock-panel"), 90)
    found["logged_in_seconds"] = round(time.monotonic() - started, 1)
    driver.get(f"{base}/lab/tree/{notebook}")
    wait("the notebook", lambda: driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell"), 90)
    wait("the kernel", lambda: "Idle" in driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel").text
         or driver.execute_script("return document.body.innerText.includes('Idle')"), 90)
    wait("the Run menu", lambda: [item for item in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")
                                  if item.text.strip() == "Run"][0], 30).click()
    wait("Run All Cells", lambda: [item for item in driver.find_elements(By.CSS_SELECTOR, ".lm-Menu-item")
                                   if item.text.strip().startswith("Run All Cells")][0], 30).click()
    run_started = time.monotonic()
    text = wait(f"the notebook's output ({expect})", lambda: (lambda t: t if expect in t else None)(
        "\n".join(area.text for area in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output"))), 240)
    found.update(notebook=notebook, output=text, run_seconds=round(time.monotonic() - run_started, 1),
                 errors=[area.text for area in driver.find_elements(By.CSS_SELECTOR,
                                                                     "[data-mime-type='application/vnd.jupyter.stderr']")])
    driver.save_screenshot(str(out / "lab-notebook.png"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--lab", default="")
    parser.add_argument("--token-file", type=Path)
    parser.add_argument("--notebook", default="examples/01-arrays.ipynb")
    parser.add_argument("--expect", default="mean of x + x.T:")
    parser.add_argument("--pages", default=",".join(DASHBOARD_PAGES), help="dashboard pages, comma-separated")
    parser.add_argument("--bokeh-facts", action="store_true", help="record what each page's plots draw")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    driver = browser(args.chromium, args.chromedriver)
    try:
        result["browser"] = driver.capabilities.get("browserVersion")
        result["chromedriver"] = driver.capabilities.get("chrome", {}).get("chromedriverVersion", "").split(" ")[0]
        result["dashboard"] = dashboard(driver, args.dashboard, args.out, tuple(args.pages.split(",")),
                                        args.bokeh_facts)
        if args.lab and args.token_file:
            try:
                result["lab"] = lab(driver, args.lab, args.token_file.read_text().strip(), args.notebook, args.expect,
                                    args.out)
            except Exception as error:  # noqa: BLE001 - reported, with the page as it was
                driver.save_screenshot(str(args.out / "lab-failed.png"))
                result["lab"] = {"error": f"{type(error).__name__}: {error}"}
    finally:
        driver.quit()
    (args.out / "browser.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
