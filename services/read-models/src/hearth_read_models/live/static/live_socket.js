// Hearth live page: the page's session and its websocket. The session: the presented token is traded
// once for a short-lived page token (POST /v1/session), renewed before it ends; a renewal moves the
// websocket to the new token, resuming with `after`. The websocket (WS /v1/subscribe): snapshots and
// changes drawn into the device cards; a snapshot for a device this connection already heard of means a
// rebuild swapped in new views, so the device list is read again. Loaded before app.js, whose helpers and
// state (token, devices, touched, replaceDevices, onEvent...) it uses at run time.
"use strict";

// ------------------------------------------------------------------------------------------ session

let renewTimer = null;

async function openSession(presented) {
  const response = await fetch("/v1/session", { method: "POST", headers: { Authorization: `Bearer ${presented}` } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(detailText(body.detail) || `POST /v1/session answered ${response.status}`);
    error.status = response.status;
    throw error;
  }
  token = body.token;
  pageSession.admin = body.home_id === null;
  pageSession.home = homeParam || body.home_id || "";
  sessionStorage.setItem(SESSION_KEY, token);
  clearTimeout(renewTimer);
  renewTimer = setTimeout(renew, body.renew_after_s * 1000);
}

async function renew() {
  try {
    await openSession(token);
  } catch (error) {
    if (error.status === 401) {
      sessionStorage.removeItem(SESSION_KEY);
      notice(`This page's session ended (${error.message}): open a new link (hearth token create --home <home> --link).`);
    } else {
      renewTimer = setTimeout(renew, RENEW_RETRY_MS);
    }
    return;
  }
  const old = socket;
  connect(); // the open websocket holds the old token, which ends: carry on with the new one
  if (old) old.close(1000, "renewed");
}

// ---------------------------------------------------------------------------------------- websocket

let retries = 0;
let socket = null; // the current websocket; a replaced one's late messages and close are ignored

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const me = new WebSocket(`${scheme}://${location.host}/v1/subscribe?token=${encodeURIComponent(token)}`);
  socket = me;
  let alertsLoaded = false;
  const heard = new Set(); // devices this connection has sent a snapshot or a change of
  me.onopen = () => {
    if (socket !== me) return;
    const request = { action: "subscribe" };
    if (homeParam) request.home_id = homeParam;
    if (devices.size) request.after = Object.fromEntries([...devices].map(([id, d]) => [id, d.twin.version]));
    me.send(JSON.stringify(request));
    retries = 0;
    $("conn").textContent = "live";
    $("conn").className = "conn live";
    notice("");
  };
  me.onmessage = (message) => {
    if (socket !== me) return;
    const m = JSON.parse(message.data);
    if (m.type === "snapshot" || m.type === "change") {
      const swapped = m.type === "snapshot" && heard.has(m.device_id);
      heard.add(m.device_id);
      touched.add(m.device_id);
      const d = deviceEntry(m.twin);
      d.twin = m.twin;
      renderTwin(d);
      if (m.event) onEvent(m.event);
      if (swapped) {
        if (!replacing) touched.clear(); // what came before this swap is in the rebuilt views
        touched.add(m.device_id);
        replaceDevices(homeParam || m.twin.home_id);
      }
      if (!alertsLoaded) {
        alertsLoaded = true;
        loadAlerts(m.twin.home_id);
      }
    } else if (m.type === "heartbeat") {
      $("beat").textContent = `heartbeat ${new Date(m.at).toLocaleTimeString()}`;
    } else if (m.type === "error") {
      notice(`${m.reason}: ${m.message}`);
    }
  };
  me.onclose = (event) => {
    if (socket !== me) return;
    const fatal = FATAL_CLOSES.has(event.code);
    $("conn").textContent = fatal ? `closed (${event.code})` : "reconnecting…";
    $("conn").className = "conn down";
    if (event.reason) notice(event.reason);
    if (fatal) clearTimeout(renewTimer);
    else setTimeout(() => socket === me && connect(), Math.min(10000, 500 * 2 ** retries++));
  };
}
