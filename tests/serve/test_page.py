"""The page at / in a real browser (Debian's chromium + chromium-driver, driven by selenium)."""

import shutil

import pytest

pytestmark = pytest.mark.slow

CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(not (CHROMEDRIVER and CHROMIUM), reason="chromium and chromium-driver are not installed")


def open_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@needs_chromium
def test_typing_a_sentence_shows_its_translation_and_one_heat_map_per_attention_layer(served, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    server, _, _ = served
    expected = server.translate(text="s4 s5 s6")[1]["translations"][0]["text"]
    browser = open_browser()
    try:
        browser.get(server.url + "/")
        wait = WebDriverWait(browser, 60)
        wait.until(lambda b: "fconv_iwslt_de_en" in b.find_element(By.ID, "model").text)
        browser.find_element(By.ID, "source").send_keys("s4 s5 s6")
        browser.find_element(By.ID, "go").click()
        wait.until(lambda b: b.find_element(By.ID, "translation").text != "")
        assert browser.find_element(By.ID, "translation").text == expected
        maps = wait.until(expected_conditions.presence_of_all_elements_located((By.CSS_SELECTOR, "canvas.attention")))
        assert len(maps) == 2  # the tiny model's two decoder layers with attention
        captions = [f.text for f in browser.find_elements(By.TAG_NAME, "figcaption")]
        assert captions == ["decoder layer 1", "decoder layer 2"]
        # the heat map is drawn: its pixels are not all one colour
        shades = browser.execute_script(
            "const c = document.querySelector('canvas.attention'); const d = c.getContext('2d')"
            ".getImageData(0, 0, c.width, c.height).data; const s = new Set();"
            "for (let i = 0; i < d.length; i += 4) s.add(d[i]); return s.size;"
        )
        assert shades > 10
        # an empty sentence is refused on the page, with the message and no request
        browser.find_element(By.ID, "source").clear()
        browser.find_element(By.ID, "go").click()
        assert browser.find_element(By.ID, "error").text == "Type a sentence first."
        browser.save_screenshot(str(tmp_path / "page.png"))
        assert (tmp_path / "page.png").stat().st_size > 10_000
    finally:
        browser.quit()


@needs_chromium
def test_the_model_selector_a_paragraph_and_a_long_sentence(served_models):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    server, _, _ = served_models
    text = "s4 s5 s6\ns7 s8 s9. s1 s2"
    expected = server.translate(text=text, document=True, model="int8")[1]["translations"][0]
    assert len(expected["sentences"]) == 3
    browser = open_browser()
    try:
        browser.get(server.url + "/")
        wait = WebDriverWait(browser, 60)
        wait.until(lambda b: len(Select(b.find_element(By.ID, "models")).options) == 2)
        Select(browser.find_element(By.ID, "models")).select_by_value("int8")
        assert "int8" in browser.find_element(By.ID, "model").text
        source = browser.find_element(By.ID, "source")
        source.send_keys("s4 s5 s6", Keys.SHIFT, Keys.ENTER, Keys.NULL, "s7 s8 s9. s1 s2")
        browser.find_element(By.ID, "go").click()
        wait.until(lambda b: b.find_element(By.ID, "translation").text != "")
        assert browser.find_element(By.ID, "translation").text == expected["text"]  # two lines, as sent
        assert "3 sentences" in browser.find_element(By.ID, "meta").text
        captions = [f.text for f in browser.find_elements(By.TAG_NAME, "figcaption")]
        assert captions == ["decoder layer 1, sentence 1 of 3", "decoder layer 2, sentence 1 of 3"]
        # a long sentence: its heat maps are capped, not a canvas thousands of pixels wide
        source.clear()
        source.send_keys(" ".join(f"s{i % 30}" for i in range(150)))
        browser.find_element(By.ID, "go").click()
        wait.until(lambda b: "tokens)" in b.find_element(By.TAG_NAME, "figcaption").text)
        widths = browser.execute_script("return [...document.querySelectorAll('canvas.attention')].map(c => c.width)")
        assert widths and max(widths) < 1400
    finally:
        browser.quit()
