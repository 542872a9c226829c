"""The screenshot of fconv-serve's page in docs/serving.md, taken in headless chromium.

    python scripts/page_screenshot.py examples/bible_es_en/runs/latest docs/serve-page.png
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.serve.conftest import Server  # noqa: E402
from tests.serve.test_page import open_browser  # noqa: E402

SENTENCE = "Y dijo Dios: Sea la luz: y fué la luz."


def main():
    run, output = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    server = Server(run / "data-bin", run / "checkpoints" / "checkpoint_best.pt", "--source-lang", "es", "--target-lang", "en",
                    "--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", run / "codes", "--beam", "5",
                    log_path=run / "page-screenshot.log")
    browser = open_browser()
    try:
        browser.set_window_size(1400, 1000)
        browser.get(server.url + "/")
        browser.find_element(By.ID, "source").send_keys(SENTENCE)
        browser.find_element(By.ID, "go").click()
        WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "canvas.attention"))
        browser.save_screenshot(str(output))
        print(f"{output}: {browser.find_element(By.ID, 'translation').text}")
    finally:
        browser.quit()
        server.stop()


if __name__ == "__main__":
    main()
