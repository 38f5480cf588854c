// The dashboard in headless Chromium (Debian's, through playwright-core): run by
// serve/tests/dashboard.rs with BASE (the service), TOKEN and SCREENSHOT set.
'use strict';
const { chromium } = require('playwright-core');

const BASE = process.env.BASE;
const TOKEN = process.env.TOKEN;
const SCREENSHOT = process.env.SCREENSHOT;

async function api(method, path, body) {
  const r = await fetch(BASE + path, {
    method,
    headers: { authorization: 'Bearer ' + TOKEN, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await r.json();
  if (!r.ok) throw new Error(method + ' ' + path + ': ' + JSON.stringify(data));
  return data;
}

function check(cond, what) {
  if (!cond) throw new Error('failed: ' + what);
  console.log('ok: ' + what);
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const errors = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.on('pageerror', (e) => errors.push(e.message));
    // An answer with an error status is logged by Chromium as "Failed to load resource";
    // the test causes one on purpose (a second cancel), the page shows it in its status.
    page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text()); });
    page.setDefaultTimeout(20000);

    await page.goto(BASE + '/');
    check((await page.title()) === 'delayq', 'the page loads');
    await page.locator('[data-testid=mode]', { hasText: 'token required' }).waitFor();
    const row = '#reliable tr[data-queue="web"]';
    await page.locator(row).waitFor();
    const count = async (r, c) => Number(await page.locator(`${r} td[data-count="${c}"]`).textContent());
    const before = await count(row, 'delayed');

    // The counts change as the test offers.
    for (let i = 0; i < 3; i++) await api('POST', '/v1/queues/web/messages', { payload: 'm' + i, delay_ms: 600000 });
    await page.waitForFunction(([r, n]) => {
      const td = document.querySelector(r + ' td[data-count="delayed"]');
      return td && Number(td.textContent) === n;
    }, [row, before + 3]);
    check((await count(row, 'delayed')) === before + 3, `delayed count went ${before} -> ${before + 3}`);

    // The token typed into the page is used by its buttons.
    await page.fill('[data-testid=token]', TOKEN);
    await page.click('#token-form button');

    // A dead letter with a JSON payload: previewed as text, JSON and hex, then requeued.
    await page.click('#reliable tr[data-queue="dl"]');
    await page.locator('[data-testid=detail-name]', { hasText: 'dl' }).waitFor();
    const dead = '#dead tr[data-id="dead-1"]';
    await page.locator(dead).waitFor();
    check((await page.locator(dead + ' pre').textContent()) === '{"x":1,"y":[2,3]}', 'text preview');
    await page.selectOption('[data-testid=preview]', 'json');
    await page.locator(dead + ' pre', { hasText: '"y": [' }).waitFor();
    check((await page.locator(dead + ' pre').textContent()).includes('\n  "x": 1'), 'JSON preview is pretty');
    await page.selectOption('[data-testid=preview]', 'hex');
    await page.locator(dead + ' pre', { hasText: '7b 22 78 22' }).waitFor();
    check(true, 'hex preview');
    await page.locator('#lateness rect').first().waitFor({ state: 'attached' });
    check((await page.locator('#lateness rect').count()) > 0, 'the lateness chart is drawn');

    await page.locator(dead + ' [data-testid=requeue]').click();
    await page.locator('[data-testid=status]', { hasText: 'requeued 1' }).waitFor();
    await page.locator(dead).waitFor({ state: 'detached' });
    const dl = await api('GET', '/v1/queues/dl');
    check(dl.counts.dead === 0 && dl.counts.ready + dl.counts.in_flight === 1, 'the dead letter is ready again: ' + JSON.stringify(dl.counts));
    await page.waitForFunction(() => {
      const td = document.querySelector('#reliable tr[data-queue="dl"] td[data-count="dead"]');
      return td && td.textContent === '0';
    });
    check(true, 'the table shows it');

    // Cancel and reschedule by id.
    await api('POST', '/v1/queues/dl/messages', { payload: 'c', id: 'cancel-me', delay_ms: 600000 });
    await api('POST', '/v1/queues/dl/messages', { payload: 'r', id: 'move-me', delay_ms: 600000 });
    await page.fill('[data-testid=cancel-id]', 'cancel-me');
    await page.click('[data-testid=cancel]');
    await page.locator('[data-testid=status]', { hasText: 'cancelled "cancel-me"' }).waitFor();
    await page.fill('[data-testid=cancel-id]', 'cancel-me');
    await page.click('[data-testid=cancel]');
    await page.locator('[data-testid=status]', { hasText: 'not_found' }).waitFor();
    check(true, 'cancel by id, and a second cancel says not found');
    // An id is taken as typed: " pad " is another message than "pad".
    await api('POST', '/v1/queues/dl/messages', { payload: 'p1', id: ' pad ', delay_ms: 600000 });
    await api('POST', '/v1/queues/dl/messages', { payload: 'p2', id: 'pad', delay_ms: 600000 });
    await page.fill('[data-testid=cancel-id]', ' pad ');
    await page.click('[data-testid=cancel]');
    await page.locator('[data-testid=status]', { hasText: 'cancelled " pad "' }).waitFor();
    check((await api('DELETE', '/v1/queues/dl/messages/pad')).cancelled === true, 'cancel of " pad " left "pad" alone');
    await page.fill('[data-testid=reschedule-id]', 'move-me');
    await page.fill('[data-testid=reschedule-ms]', '0');
    await page.click('[data-testid=reschedule]');
    await page.locator('[data-testid=status]', { hasText: 'rescheduled "move-me"' }).waitFor();
    await page.waitForFunction(() => {
      const td = document.querySelector('#reliable tr[data-queue="dl"] td[data-count="ready"]');
      return td && td.textContent === '2';
    });
    check(true, 'reschedule by id: it became ready');

    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    console.log('screenshot: ' + SCREENSHOT);

    // Purge asks first.
    const d2 = await api('POST', '/v1/queues/dl/receive', { max: 10 });
    for (const d of d2.deliveries) await api('POST', `/v1/queues/dl/deliveries/${d.delivery_id}/nack`, {});
    await page.locator('#dead tbody tr').first().waitFor();
    page.once('dialog', (d) => d.accept());
    await page.click('[data-testid=purge]');
    await page.locator('[data-testid=status]', { hasText: 'purged 2' }).waitFor();
    check(true, 'purge after the confirmation');

    check(errors.length === 0, 'no errors in the page: ' + errors.join('; '));
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
