// Hearth live page: a scheduled device's program, its coming transitions and its hold, under its card,
// from the query API's GET /v1/homes/{home}/schedules (the home journal folded with the scheduler's own
// rules; times in the home's zone). Each program entry shows its days, time and command as its type
// labels it, and whether it preheats (starts early enough to reach its target at its time), with how
// early the latest preheat started and why (the view's `last_preheat`). Read every
// few seconds and soon after any command fact (a person's command holds the schedule until the next
// transition); "Resume" ends a hold (the command API's POST /v1/devices/{id}/schedule/resume). Loaded
// before app.js (el, devices, commandApi, auth, ago; device_types.js's commandPhrase).
"use strict";

const SCHEDULES_EVERY_MS = 5000;
let schedulePoller = null;

function watchSchedules(home) {
  schedulePoller = makePoller(() => loadSchedules(home), SCHEDULES_EVERY_MS);
  schedulePoller.start();
}

async function loadSchedules(home) {
  const body = await readJson(`/v1/homes/${encodeURIComponent(home)}/schedules?count=3`, "GET schedules");
  const byDevice = new Map(body.schedules.map((s) => [s.device_id, s]));
  for (const d of devices.values()) renderSchedule(d, byDevice.get(d.twin.device_id));
}

function localTime(t) {
  // "mon 07:00 (+01:00)": the transition's local weekday and time in the home's zone, with its offset
  const [day, time] = t.local.split("T");
  return `${t.weekday} ${day.slice(5)} ${time.slice(0, 5)} (${t.utc_offset})`;
}

function renderSchedule(d, schedule) {
  const box = d.ui.schedule;
  box.hidden = !schedule;
  if (!schedule) {
    box.replaceChildren();
    return;
  }
  const hold = schedule.hold;
  box.dataset.held = hold ? "true" : "false";
  const parts = [
    el("h3", {}, `Schedule · ${schedule.timezone}`),
    hold ? el("p", { class: "hold" }, "Held by a person's command until ",
      el("time", { datetime: hold.until }, inZone(hold.until, schedule.timezone)), " ",
      el("button", { class: "resume", onclick: () => resumeSchedule(d) }, "Resume")) : null,
    schedule.program.length ? programList(d, schedule.program, [], schedule.last_preheat) : null,
    el("h4", {}, "Next"),
    el("ol", { class: "transitions" }, ...schedule.next.map((t) =>
      el("li", { class: "transition", dataset: { at: t.at } },
        el("span", { class: "when" }, localTime(t)), el("span", { class: "what" }, commandPhrase(d.twin.type, t.command))))),
    schedule.next.length ? null : el("p", { class: "muted" }, "no coming transitions"),
  ];
  box.replaceChildren(...parts.filter(Boolean));
}

// A program (the schedule's format: days, at, command, preheat?) as a list: "Mon–Fri 06:30 Set target ·
// 21 °C preheat". An entry's `title` may say more (a suggestion's evidence for it); `last` is the latest
// firing of a preheat entry, shown on its entry.
function programList(d, program, titles = [], last = null) {
  return el("ol", { class: "program" }, ...program.map((entry, i) =>
    el("li", { class: "entry", dataset: { entry: String(i) }, ...(titles[i] ? { title: titles[i] } : {}) },
      el("span", { class: "days" }, daysText(entry.days)),
      el("span", { class: "at" }, entry.at),
      el("span", { class: "what" }, commandPhrase(d.twin.type, entry.command)),
      entry.preheat ? el("span", { class: "preheat", title: `starts early, to reach it at ${entry.at}` }, "preheat") : null,
      entry.preheat && last?.entry === i ? el("span", { class: "preheat-run muted", title: last.at }, preheatRunText(last)) : null)));
}

// Why a preheat started when it did (the scheduler's reasons: hearth_shared/domain/preheat.py).
const PREHEAT_REASONS = {
  reaches_target: "to reach its target in time",
  capped: "as early as it may",
  unreachable: "as early as it may, though the room levels off below its target on a night this cold",
  warm_enough: "the room was warm enough",
  no_response: "the room's response is not learned yet",
  no_reading: "no temperature reading",
  missed_lead: "the scheduler was not running",
};

function preheatRunText(last) {
  const minutes = Math.round(last.lead_s / 60);
  const when = minutes ? `started ${minutes} min early` : "started on time";
  const more = last.needed_s ? ` (it needed ${Math.round(last.needed_s / 60)} min)` : "";
  return `last ${when}: ${PREHEAT_REASONS[last.reason] || last.reason}${more}`;
}

const WEEK = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

// Days as a person writes them: runs of three or more as a span ("Mon–Fri"), the whole week "Every day".
function daysText(days) {
  const on = WEEK.map((day) => days.includes(day));
  if (on.every(Boolean)) return "Every day";
  const name = (i) => WEEK[i][0].toUpperCase() + WEEK[i].slice(1);
  const parts = [];
  for (let i = 0; i < 7; i++) {
    if (!on[i]) continue;
    let j = i;
    while (j + 1 < 7 && on[j + 1]) j++;
    parts.push(...(j - i >= 2 ? [`${name(i)}–${name(j)}`] : WEEK.slice(i, j + 1).map((_, k) => name(i + k))));
    i = j;
  }
  return parts.join(", ");
}

function inZone(iso, timeZone) {
  // an instant as the home's clock shows it ("tue 22:15"), like the transitions
  const options = { timeZone, weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
  return new Date(iso).toLocaleString("en-GB", options).toLowerCase();
}

async function resumeSchedule(d) {
  const id = d.twin.device_id;
  const response = await fetch(`${commandApi}/v1/devices/${encodeURIComponent(id)}/schedule/resume`, {
    method: "POST",
    headers: auth(),
  }).catch((error) => ({ ok: false, status: error.message }));
  if (!response.ok) notice(`Resume of ${id}'s schedule failed: ${response.status}`);
  schedulePoller?.soon();
}
