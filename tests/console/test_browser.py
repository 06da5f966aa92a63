"""The console in a real headless Chromium (Debian's ``chromium`` and ``chromedriver``,
installed by ``make sysdeps``; Selenium Manager is kept offline, nothing is downloaded).

One cluster (two broker groups, each serving the v2 gRPC endpoint), one console and one
browser for the module. The console runs under uvicorn in a thread, on a socket bound to a
free loopback port, with a short dashboard sample interval. Producers and consumers run
on the SDK's background loop (``run_blocking``). Without chromium or its driver the tests
skip, or fail when ``CI`` is set. A failed test leaves a screenshot under
``$TEST_ARTIFACTS`` (or pytest's temporary directory) and prints its path; with
``README_SCREENSHOTS`` set, the cluster and dashboard tests write the README's screenshots
into ``docs/``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select
from starlette.applications import Starlette

from rocketq import Message, Producer
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.console.app import create_app
from rocketq.console.security import hash_password
from rocketq.sdk.admin import Admin
from rocketq.sdk.background_loop import run_blocking
from tests.console.test_v5_clients import v5_heartbeat, v5_terminate
from tests.dead_letters import consume_fixed, fill_dlq
from tests.integration.conftest import SMALL_STORE
from tests.system_deps import major_version, require_command, unavailable

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
MIN_CHROMIUM = 120
DOCS = Path(__file__).resolve().parents[2] / "docs"
# Where a failed test's screenshot goes (else pytest's temporary directory), and whether to
# write the README's screenshots into docs/.
ARTIFACTS = os.environ.get("TEST_ARTIFACTS")
SCREENSHOTS = bool(os.environ.get("README_SCREENSHOTS"))
WAIT = 20.0  # seconds any one condition in the browser may take
SAMPLE_INTERVAL = 0.5  # the dashboard's seconds between samples

DLQ_GROUP = "cg-browser-dlq"
DLQ_TOPIC = "BrowserPay"
LAG_GROUP = "cg-browser-lag"
LAG_TOPIC = "BrowserLag"
V5_GROUP = "cg-browser-v5"
LOGIN_PASSWORD = "wonderland"


# -- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("console-browser"),
        brokers=2,
        broker_settings=SMALL_STORE,
        grpc=True,  # each broker's apache.rocketmq.v2 endpoint, on a free port
    )
    with LocalCluster(spec) as started:
        yield started


@contextlib.contextmanager
def served(app: Starlette, host: str = "127.0.0.1") -> Iterator[str]:
    """``app`` under uvicorn in a thread on a socket bound here (no port race) -> its base
    URL, named with ``host``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="console", daemon=True
    )
    thread.start()
    try:
        wait_for(lambda: server.started, "the console to start")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def console(cluster: LocalCluster) -> Iterator[str]:
    """The console's base URL (login off)."""
    with served(create_app(cluster.namesrv_addr, sample_interval=SAMPLE_INTERVAL)) as url:
        yield url


@pytest.fixture(scope="module")
def login_console(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second console, with login on (user alice), reached as ``localhost`` so that its
    cookie is not the first console's (cookies are per host name, not per port)."""
    users = tmp_path_factory.mktemp("console-login") / "users"
    users.write_text(f"alice:{hash_password(LOGIN_PASSWORD)}\n")
    with served(create_app(cluster.namesrv_addr, users), host="localhost") as url:
        yield url


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    # Headless mode "new" and the W3C protocol Selenium 4 speaks; a driver drives only the
    # browser of its own major version.
    require_command(CHROMIUM, minimum=MIN_CHROMIUM, package="chromium")
    require_command(CHROMEDRIVER, minimum=MIN_CHROMIUM, package="chromium-driver")
    if major_version(CHROMIUM) != major_version(CHROMEDRIVER):
        unavailable(
            f"chromedriver {major_version(CHROMEDRIVER)} cannot drive chromium "
            f"{major_version(CHROMIUM)}: install both from one suite (`make sysdeps`)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SE_OFFLINE", "true")  # Selenium Manager must never download anything
        browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def browser(
    driver: WebDriver, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebDriver]:
    """The module's browser; when the test fails, a screenshot of what it showed."""
    yield driver
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        folder = Path(ARTIFACTS) if ARTIFACTS else tmp_path_factory.mktemp("screenshots")
        folder.mkdir(parents=True, exist_ok=True)
        shot = folder / f"{request.node.name}.png"
        driver.save_screenshot(str(shot))
        print(f"screenshot of the failed test {request.node.nodeid}: {shot}")


# -- helpers -----------------------------------------------------------------------------


def wait_for(cond: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    """Poll ``cond`` until it holds, or fail after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def reload_until(browser: WebDriver, cond: Callable[[], object], what: str) -> None:
    """Reload the page until ``cond`` holds (the console's pages do not refresh themselves)."""

    def holds() -> object:
        if cond():
            return True
        browser.refresh()
        return False

    wait_for(holds, what)


def keep_screenshot(browser: WebDriver, name: str) -> None:
    """The README's screenshots, only when asked for (``README_SCREENSHOTS``)."""
    if SCREENSHOTS:
        DOCS.mkdir(exist_ok=True)
        assert browser.save_screenshot(str(DOCS / name))


def post_form(browser: WebDriver, action: str) -> WebElement:
    return browser.find_element(By.CSS_SELECTOR, f'form[method="post"][action="{action}"]')


def submit(browser: WebDriver, form: WebElement) -> None:
    """Click the form's button and wait for the next page."""
    old = browser.find_element(By.TAG_NAME, "html")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(lambda: is_stale(old), "the next page")


def is_stale(element: WebElement) -> bool:
    try:
        element.tag_name  # noqa: B018 - any access of a gone element raises
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        # Chromium may instead name the node's document gone while the next page loads.
        if "does not belong to the document" in str(exc.msg):
            return True
        raise
    return False


def header_lag(browser: WebDriver) -> int:
    """The lag in the group page's heading ("Consumer group G lag N")."""
    return int(browser.find_element(By.CSS_SELECTOR, "h1 small").text.removeprefix("lag "))


def series_lines(browser: WebDriver) -> list[WebElement]:
    """The broker chart's drawn series (pygal's ``g.series path.line``, not its guides)."""
    return browser.find_elements(By.CSS_SELECTOR, "#broker-chart svg g.series path.line")


async def send_and_consume(ns: str, count: int) -> None:
    async with Admin(ns) as admin:
        await admin.update_topic(LAG_TOPIC, read_queue_nums=2, write_queue_nums=2)
    bodies = [f"lag-{i}" for i in range(count)]
    async with Producer("pg-browser-lag", ns) as producer:
        for body in bodies:
            await producer.send(Message(LAG_TOPIC, body.encode()))
    await consume_fixed(ns, LAG_TOPIC, LAG_GROUP, set(bodies))


def column(browser: WebDriver, header: str) -> list[str]:
    """The texts of the page's first table's column headed ``header``."""
    heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "table thead th")]
    index = heads.index(header)
    rows = browser.find_elements(By.CSS_SELECTOR, "table tbody tr")
    return [row.find_elements(By.TAG_NAME, "td")[index].text for row in rows]


async def fifo_group(ns: str, group: str) -> None:
    """``group`` as a FIFO group (consume_message_orderly) on every master."""
    async with Admin(ns) as admin:
        await admin.update_sub_group(group, consume_message_orderly=True)


# -- tests -------------------------------------------------------------------------------


def test_the_cluster_page_lists_the_brokers(browser: WebDriver, console: str) -> None:
    browser.get(console + "/")
    assert browser.title.startswith("Cluster")
    rows = browser.find_elements(By.CSS_SELECTOR, "table tbody tr")
    groups = sorted(row.find_elements(By.TAG_NAME, "td")[1].text for row in rows)
    assert groups == ["broker-a", "broker-b"]
    assert not browser.find_elements(By.ID, "down")
    keep_screenshot(browser, "console-cluster.png")


def test_the_cluster_page_shows_each_brokers_grpc_endpoint_and_a_v5_consumer(
    browser: WebDriver, console: str, cluster: LocalCluster
) -> None:
    browser.get(console + "/")
    endpoints = {f"{n.host}:{n.grpc_port}" for n in cluster.brokers}
    assert len(endpoints) == 2 and set(column(browser, "gRPC endpoint")) == endpoints

    # A RocketMQ 5 consumer heartbeats to broker-a's endpoint, in a FIFO group.
    a = next(n for n in cluster.brokers if n.broker_name == "broker-a")
    run_blocking(fifo_group(cluster.namesrv_addr, V5_GROUP))
    v5_heartbeat(f"{a.host}:{a.grpc_port}", V5_GROUP, "py-browser-1", "PYTHON")
    try:
        browser.get(f"{console}/groups/{V5_GROUP}")
        assert browser.find_element(By.CSS_SELECTOR, "#fifo strong").text == "on"
        connections = browser.find_element(By.XPATH, "//h2[text()='Connections']/following::table")
        cells = [td.text for td in connections.find_elements(By.CSS_SELECTOR, "tbody td")]
        assert "py-browser-1" in cells and "PYTHON" in cells and "pop (v5 gRPC)" in cells
    finally:
        v5_terminate(f"{a.host}:{a.grpc_port}", V5_GROUP, "py-browser-1")


def test_create_a_topic_send_a_test_message_and_find_it_by_key(
    browser: WebDriver, console: str
) -> None:
    topic, key = "BrowserMade", "browser-key-1"
    browser.get(console + "/topics")
    create = post_form(browser, "/topics")
    create.find_element(By.NAME, "topic").send_keys(topic)
    for name in ("read_queue_nums", "write_queue_nums"):
        field = create.find_element(By.NAME, name)
        field.clear()
        field.send_keys("2")
    submit(browser, create)
    assert browser.current_url == f"{console}/topics/{topic}"
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Topic {topic}")

    send = post_form(browser, f"/topics/{topic}/send")
    send.find_element(By.NAME, "keys").send_keys(key)
    send.find_element(By.NAME, "body").send_keys("hello from the browser")
    submit(browser, send)
    assert "SEND_OK" in browser.find_element(By.ID, "sent").text

    browser.get(console + "/messages")
    by_key = browser.find_element(By.CSS_SELECTOR, 'form:has(input[name="mode"][value="key"])')
    by_key.find_element(By.NAME, "topic").send_keys(topic)
    by_key.find_element(By.NAME, "key").send_keys(key)
    submit(browser, by_key)
    # The broker's key index may lag the send a little: search again until it is there.
    reload_until(
        browser,
        lambda: browser.find_elements(By.CSS_SELECTOR, "#results + table tbody a"),
        f"the message with key {key}",
    )
    links = browser.find_elements(By.CSS_SELECTOR, "#results + table tbody a")
    assert len(links) == 1
    offset_id = links[0].text
    links[0].click()
    wait_for(lambda: browser.current_url.endswith(f"/messages/{offset_id}"), "the detail page")
    assert browser.find_element(By.CSS_SELECTOR, "pre.body").text == "hello from the browser"
    assert key in browser.find_element(By.CSS_SELECTOR, "table.kv").text
    trace = browser.find_element(By.XPATH, "//h2[text()='Trace']/following-sibling::*[1]")
    # The console's own producer does not trace: the section says so.
    assert trace.text.startswith("No trace"), trace.text


def test_a_dead_letter_resent_from_the_dlq_page_is_consumed(
    browser: WebDriver, console: str, cluster: LocalCluster
) -> None:
    ns = cluster.namesrv_addr
    bodies = run_blocking(fill_dlq(ns, DLQ_TOPIC, DLQ_GROUP, 2, prefix="dead"))
    browser.get(f"{console}/dlq?group={DLQ_GROUP}")
    rows = browser.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert sorted(r.find_elements(By.TAG_NAME, "td")[5].text for r in rows) == bodies
    chosen = next(r for r in rows if r.find_elements(By.TAG_NAME, "td")[5].text == bodies[0])
    chosen.find_element(By.CSS_SELECTOR, 'input[type="checkbox"]').click()
    submit(browser, post_form(browser, f"/dlq/{DLQ_GROUP}/resend"))
    assert browser.find_element(By.ID, "resent").text.startswith("Resent 1 dead letter")
    run_blocking(consume_fixed(ns, DLQ_TOPIC, DLQ_GROUP, {bodies[0]}))


def test_reset_offsets_by_time_changes_the_lag(
    browser: WebDriver, console: str, cluster: LocalCluster
) -> None:
    run_blocking(send_and_consume(cluster.namesrv_addr, 3))
    browser.get(f"{console}/groups/{LAG_GROUP}")
    reload_until(browser, lambda: header_lag(browser) == 0, "lag 0 after the consumer")

    form = post_form(browser, f"/groups/{LAG_GROUP}/reset")
    Select(form.find_element(By.NAME, "topic")).select_by_visible_text(LAG_TOPIC)
    # Time 0: the console reads the datetime-local input's value as UTC.
    epoch = "1970-01-01T00:00:00"
    stamp = form.find_element(By.NAME, "timestamp")
    browser.execute_script("arguments[0].value = arguments[1];", stamp, epoch)
    submit(browser, form)
    assert LAG_TOPIC in browser.find_element(By.ID, "reset").text
    assert header_lag(browser) == 3


def test_the_dashboard_draws_its_charts(browser: WebDriver, console: str) -> None:
    browser.get(console + "/dashboard")
    # Two samples make each series' first point, three a line: reload until a line has a
    # segment ("M x y L x y").
    reload_until(
        browser,
        lambda: any("L" in (p.get_attribute("d") or "") for p in series_lines(browser)),
        "the dashboard's charts",
    )
    for chart in ("broker-chart", "topic-chart"):
        svg = browser.find_element(By.CSS_SELECTOR, f"#{chart} svg")
        assert svg.size["width"] > 100 and svg.size["height"] > 100
    legend = browser.find_element(By.CSS_SELECTOR, "#broker-chart svg").text
    assert "broker-a in" in legend and "broker-b out" in legend
    # Not blank: every series of the broker chart is a visible stroke of some length.
    lines = series_lines(browser)
    assert len(lines) == 4  # broker-a and broker-b, in and out
    for line in lines:
        length, stroke, width = browser.execute_script(
            "const s = getComputedStyle(arguments[0]);"
            "return [arguments[0].getTotalLength(), s.stroke, parseFloat(s.strokeWidth)];",
            line,
        )
        assert length > 0 and stroke not in ("none", "") and width > 0, (length, stroke, width)
    keep_screenshot(browser, "console-dashboard.png")


def test_with_login_a_page_asks_for_it_first_and_comes_back(
    browser: WebDriver, login_console: str
) -> None:
    try:
        browser.get(login_console + "/topics?kind=system")
        wait_for(lambda: "/login?next=" in browser.current_url, "the login page")
        assert browser.title.startswith("Log in")
        form = post_form(browser, "/login")
        form.find_element(By.NAME, "username").send_keys("alice")
        form.find_element(By.NAME, "password").send_keys("wrong")
        submit(browser, form)
        assert "Wrong name or password" in browser.find_element(By.CLASS_NAME, "notice").text
        form = post_form(browser, "/login")
        form.find_element(By.NAME, "username").send_keys("alice")
        form.find_element(By.NAME, "password").send_keys(LOGIN_PASSWORD)
        submit(browser, form)
        assert browser.current_url == f"{login_console}/topics?kind=system"
        assert "TBW102" in browser.find_element(By.TAG_NAME, "table").text
        browser.get(login_console + "/acl")
        assert browser.find_element(By.TAG_NAME, "h1").text == "Users & ACL"
        assert browser.find_elements(By.ID, "create-user")
        submit(browser, post_form(browser, "/logout"))
        browser.get(login_console + "/")
        wait_for(lambda: "/login" in browser.current_url, "the login page after the logout")
    finally:
        browser.delete_all_cookies()
