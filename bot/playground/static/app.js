// threadbound playground: a minimal Discord-like client for the local fake Discord.
// Everything goes through the playground's JSON API; live updates arrive as
// server-sent events naming the channels that changed. Snowflakes stay strings.
"use strict";

const ui = {
  channels: document.getElementById("channels"),
  members: document.getElementById("members"),
  pins: document.getElementById("pins"),
  guildName: document.getElementById("guild-name"),
  title: document.getElementById("channel-title"),
  messages: document.getElementById("messages"),
  form: document.getElementById("composer-form"),
  composer: document.getElementById("composer"),
  userSelect: document.getElementById("user-select"),
  help: document.getElementById("help"),
  error: document.getElementById("error"),
  attach: document.getElementById("attach"),
  fileInput: document.getElementById("file-input"),
  pending: document.getElementById("pending"),
  dropOverlay: document.getElementById("drop-overlay"),
  main: document.getElementById("main"),
};

const DEFAULT_HINT = ui.composer.placeholder;  // index.html's, for channels that are open

const app = {
  state: null,
  channelId: null,
  viewer: null,
  unread: new Set(),
  loadSeq: 0,
  pending: [],  // File objects waiting to be sent with the next message
  suggestSeq: 0,  // the latest autocomplete asked for; older answers are dropped
  suggestTimer: 0,
  pinned: true,  // the view follows the newest message until the reader scrolls up
  autoScrollTop: 0,  // the view's last place at the bottom: scrolling above it unpins
};

async function api(method, path, body) {
  const options = { method, headers: {} };
  if (body instanceof FormData) {
    options.headers["X-Playground-Upload"] = "1";  // the browser sets the multipart type
    options.body = body;
  } else if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  let data = {};
  try { data = await response.json(); } catch (_) { data = {}; }
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

function channelById(id) {
  return app.state ? app.state.channels.find((c) => c.id === id) : undefined;
}

function colourFor(name) {
  let hash = 0;
  for (const char of name) hash = (hash * 31 + char.codePointAt(0)) >>> 0;
  return `hsl(${hash % 360}, 45%, 45%)`;
}

function avatar(author) {
  if (author.avatar_url) {
    const img = document.createElement("img");
    img.className = "avatar";
    img.alt = "";
    img.src = author.avatar_url;
    img.onerror = () => img.replaceWith(initialAvatar(author.name));
    return img;
  }
  return initialAvatar(author.name);
}

function initialAvatar(name) {
  const circle = document.createElement("div");
  circle.className = "avatar";
  circle.style.background = colourFor(name || "?");
  circle.textContent = (name || "?").trim().charAt(0).toUpperCase() || "?";
  return circle;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(2)} MB`;
}

function newTabLink(className, url, text) {
  const link = el("a", className, text);
  link.href = url;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  return link;
}

// -- sidebar ---------------------------------------------------------------

function renderChannels() {
  ui.channels.replaceChildren();
  const channels = app.state.channels.filter((c) => !c.thread);
  for (const channel of channels) {
    ui.channels.append(channelButton(channel));
    const threads = app.state.channels.filter((c) => c.thread && c.parent_id === channel.id);
    for (const thread of threads) ui.channels.append(channelButton(thread));
  }
}

function channelButton(channel) {
  const button = el("button", channel.thread ? "channel thread" : "channel");
  button.textContent = channel.thread ? channel.name : `# ${channel.name}`;
  button.dataset.channelId = channel.id;
  button.dataset.channelName = channel.name;
  button.dataset.testid = channel.thread ? "thread" : "channel";
  if (channel.id === app.channelId) button.classList.add("active");
  if (app.unread.has(channel.id)) button.classList.add("unread");
  if (channel.archived) {
    button.classList.add("archived");
    button.dataset.archived = "true";
    button.title = channel.locked ? "archived and locked" : "archived";
    button.append(el("span", "badge", channel.locked ? "🔒 archived" : "archived"));
  }
  button.addEventListener("click", () => selectChannel(channel.id));
  return button;
}

function renderUsers() {
  ui.userSelect.replaceChildren();
  for (const user of app.state.users) {
    const option = el("option", "", user.admin ? `${user.name} (admin)` : user.name);
    option.value = user.id;
    option.dataset.name = user.name;
    ui.userSelect.append(option);
  }
  const saved = localStorage.getItem("playground.viewer");
  const known = app.state.users.some((u) => u.id === saved);
  app.viewer = known ? saved : app.state.users[0].id;
  ui.userSelect.value = app.viewer;
}

async function loadState() {
  app.state = await api("GET", "/api/state");
  ui.guildName.textContent = app.state.guild.name;
  if (!app.viewer) renderUsers();
  if (!app.channelId || !channelById(app.channelId)) {
    const first = app.state.channels.find((c) => !c.thread);
    app.channelId = first ? first.id : null;
  }
  renderChannels();
  renderMembers();
  renderTitle();
}

// -- members: who is online, and the bot's Stop / Kill / Start -------------

const PROCESS_NOTES = {
  running: "",
  stopping: "stopping…",
  stopped: "stopped",
};

function renderMembers() {
  ui.members.replaceChildren(el("div", "members-title", "Members"));
  for (const member of app.state.members) {
    const row = el("div", `member ${member.status}`);
    row.dataset.testid = "member";
    row.dataset.name = member.name;
    row.dataset.status = member.status;
    const dot = el("span", "presence");
    dot.title = member.status;
    row.append(dot, el("span", "member-name", member.name));
    if (member.bot) row.append(el("span", "tag", "BOT"));
    row.append(el("span", "member-status", member.status));
    ui.members.append(row);
    if (member.bot && app.state.bot.controls) ui.members.append(botControls(app.state.bot));
  }
}

function botControls(bot) {
  const box = el("div", "bot-controls");
  box.dataset.testid = "bot-controls";
  box.dataset.process = bot.process;
  const buttons = [
    ["stop", "Stop", "Stop the bot cleanly, as Ctrl-C would", bot.process !== "running"],
    ["kill", "Kill", bot.can_kill ? "End the bot at once, as kill -9 would"
      : "Kill needs the bot in its own process (python3 tb.py run)",
      bot.process === "stopped" || !bot.can_kill],
    ["start", "Start", "Start the bot again: it reads back what was written meanwhile",
      bot.process !== "stopped"],
  ];
  for (const [action, label, title, disabled] of buttons) {
    const button = el("button", `button control-${action}`, label);
    button.type = "button";
    button.title = title;
    button.disabled = disabled;
    button.dataset.testid = `bot-${action}`;
    button.addEventListener("click", () => controlBot(action));
    box.append(button);
  }
  let note = PROCESS_NOTES[bot.process] || "";
  if (bot.process === "stopped" && bot.exit_code !== null && bot.exit_code !== 0) {
    note = bot.exit_code < 0 ? `killed (signal ${-bot.exit_code})` : `ended (exit ${bot.exit_code})`;
  }
  if (note) {
    const shown = el("div", "note bot-note", note);
    shown.dataset.testid = "bot-note";
    box.append(shown);
  }
  return box;
}

async function controlBot(action) {
  try {
    await api("POST", "/api/bot", { action });
    showError("");
  } catch (err) {
    showError(err.message);
  }
}

function renderTitle() {
  const channel = channelById(app.channelId);
  if (!channel) { ui.title.textContent = ""; return; }
  if (channel.thread) {
    const parent = channelById(channel.parent_id);
    ui.title.textContent = `# ${parent ? parent.name : "?"} › ${channel.name}`;
  } else {
    ui.title.textContent = `# ${channel.name}`;
  }
  ui.composer.placeholder = composerHint(channel);
  document.body.dataset.archived = channel.archived ? "true" : "false";
}

function composerHint(channel) {
  if (channel.archived && channel.locked) {
    return "This thread is archived and locked: only moderators can send here.";
  }
  if (channel.archived) return "This thread is archived. Sending a message will unarchive it.";
  return DEFAULT_HINT;
}

async function selectChannel(id) {
  app.channelId = id;
  app.unread.delete(id);
  renderChannels();
  renderTitle();
  ui.messages.replaceChildren();
  app.pinned = true;  // a channel opens at its newest message
  app.autoScrollTop = 0;
  await loadMessages();
  ui.composer.focus();
}

// -- messages --------------------------------------------------------------

// The view stays pinned to the bottom (the newest message) while messages arrive and
// while their images load, which makes them taller after they were drawn; a reader who
// scrolled up is left where they are until they scroll back down.
const PIN_SLACK = 80;  // px from the bottom that still count as "at the bottom"

function scrollToBottom() {
  const box = ui.messages;
  box.scrollTop = box.scrollHeight;
  app.autoScrollTop = box.scrollTop;
}

// Content that grows below the view leaves scrollTop as it was, and content that shrinks
// brings it to the bottom: only a reader moves it up from the last place it was pinned.
ui.messages.addEventListener("scroll", () => {
  const box = ui.messages;
  if (box.scrollHeight - box.scrollTop - box.clientHeight < PIN_SLACK) {
    app.pinned = true;
    app.autoScrollTop = box.scrollTop;
  } else if (box.scrollTop < app.autoScrollTop - 1) {
    app.pinned = false;  // the reader went up
  }
});

// Load events do not bubble: listen while they go down to the image.
ui.messages.addEventListener("load", (event) => {
  if (event.target instanceof HTMLImageElement && app.pinned) scrollToBottom();
}, true);

async function loadMessages() {
  if (!app.channelId) return;
  const seq = ++app.loadSeq;
  const channelId = app.channelId;
  const data = await api("GET", `/api/channels/${channelId}/messages?viewer=${app.viewer}`);
  if (seq !== app.loadSeq || channelId !== app.channelId) return;  // a newer load won
  const box = ui.messages;
  box.replaceChildren(...data.messages.map(reuseOrRender));
  if (!data.messages.length) box.append(emptyHint());
  renderPins(data.messages.filter((m) => m.pinned));
  if (app.pinned) scrollToBottom();
}

// The channel's pinned messages, in a bar above the messages: a long thread keeps its
// status line in view. A click shows the message where it is.
function renderPins(pinned) {
  ui.pins.replaceChildren();
  for (const message of pinned) {
    const item = el("div", "pin");
    item.dataset.testid = "pin";
    item.dataset.messageId = message.id;
    item.append(el("span", "pin-mark", "📌"));
    const text = el("span", "content");
    text.innerHTML = message.html;  // rendered and escaped by the server (markdown.py)
    item.append(text);
    item.addEventListener("click", () => showMessage(message.id));
    ui.pins.append(item);
  }
  ui.pins.hidden = !pinned.length;
}

function showMessage(id) {
  const row = ui.messages.querySelector(`article[data-message-id="${id}"]`);
  if (!row) return;
  row.scrollIntoView({ block: "center" });
  row.classList.add("highlight");
  setTimeout(() => row.classList.remove("highlight"), 1500);  // a visual cue's duration
}

// A message that did not change keeps its element: its images stay loaded and a
// menu being chosen from keeps its choice while other messages stream.
function reuseOrRender(message) {
  const drawn = JSON.stringify(message);
  const old = ui.messages.querySelector(`article[data-message-id="${message.id}"]`);
  if (old && old.drawn === drawn) return old;
  const row = renderMessage(message);
  row.drawn = drawn;
  return row;
}

function emptyHint() {
  const channel = channelById(app.channelId);
  const hint = el("div", "empty");
  hint.append(el("h2", "", `Welcome to #${channel ? channel.name : "…"}`));
  hint.append(el("p", "", "Spawn a subagent with a slash command typed as text, e.g."));
  hint.append(el("code", "", '/agents spawn task:"compare three sorting algorithms" mode:session'));
  hint.append(el("p", "", "Type / to see every command. In its thread, a plain message steers "
    + "the agent while it works; a message starting with >> is queued as a follow-up."));
  return hint;
}

function renderMessage(message) {
  const row = el("article", "message");
  row.dataset.messageId = message.id;
  row.dataset.author = message.author.name;
  row.dataset.testid = "message";
  if (message.ephemeral) row.classList.add("ephemeral");
  if (message.type === 6) {
    row.classList.add("system");
    row.dataset.testid = "pin-line";
    const line = el("span", "thread-link", `📌 ${message.author.name} pinned a message to this channel.`);
    if (message.reference_message_id) {
      line.addEventListener("click", () => showMessage(message.reference_message_id));
    }
    row.append(line);
    return row;
  }
  if (message.type === 18) {
    row.classList.add("system");
    const link = el("span", "thread-link", `${message.author.name} started a thread: ${message.content}`);
    if (message.reference_channel_id) {
      link.addEventListener("click", () => selectChannel(message.reference_channel_id));
    }
    row.append(link);
    return row;
  }
  row.append(avatar(message.author));
  const body = el("div", "body");
  if (message.interaction) {
    body.append(el("div", "interaction-line",
      `${message.interaction.user} used /${message.interaction.command}`));
  }
  const meta = el("div", "meta");
  meta.append(el("span", "author", message.author.name));
  if (message.author.bot) meta.append(el("span", "tag", message.author.webhook ? "AGENT" : "BOT"));
  meta.append(el("span", "time", new Date(message.timestamp).toLocaleTimeString()));
  if (message.edited) meta.append(el("span", "edited", "(edited)"));
  if (message.pinned) meta.append(el("span", "edited", "📌 pinned"));
  body.append(meta);
  if (message.loading) body.append(el("div", "note", `${message.author.name} is thinking…`));
  const content = el("div", "content");
  content.dataset.testid = "content";
  content.innerHTML = message.html;  // rendered and escaped by the server (markdown.py)
  content.querySelectorAll(".channel-mention").forEach((node) =>
    node.addEventListener("click", () => selectChannel(node.dataset.channel)));
  body.append(content);
  for (const embed of message.embeds || []) body.append(renderEmbed(embed));
  if (message.attachments && message.attachments.length) body.append(renderAttachments(message));
  if (message.components && message.components.length) {
    body.append(renderComponents(message, message.components));
  }
  if (message.reactions.length) {
    const reactions = el("div", "reactions");
    for (const reaction of message.reactions) {
      const chip = el("span", reaction.me ? "reaction me" : "reaction", `${reaction.emoji} ${reaction.count}`);
      chip.dataset.emoji = reaction.emoji;
      chip.dataset.testid = "reaction";
      reactions.append(chip);
    }
    body.append(reactions);
  }
  if (message.thread) {
    const link = el("div", "thread-link", `Thread: ${message.thread.name} ›`);
    link.addEventListener("click", () => selectChannel(message.thread.id));
    body.append(link);
  }
  if (message.ephemeral) body.append(el("div", "note", "Only you can see this"));
  row.append(body);
  return row;
}

function renderAttachments(message) {
  const box = el("div", "attachments");
  for (const file of message.attachments) {
    if (file.image) {
      const link = newTabLink("attachment-image", file.url);
      if (file.spoiler) link.classList.add("spoiler-image");
      link.dataset.testid = "attachment-image";
      link.dataset.filename = file.filename;
      link.title = `${file.filename} (${formatSize(file.size)})`;
      const img = document.createElement("img");
      img.src = file.url;
      img.alt = file.filename;
      img.loading = "lazy";
      link.append(img);
      box.append(link);
      continue;
    }
    const card = el("div", "attachment-file");
    card.dataset.testid = "attachment-file";
    card.dataset.filename = file.filename;
    card.append(el("span", "file-icon", "📄"));
    const info = el("div", "file-info");
    info.append(newTabLink("file-name", file.url, file.filename));
    info.append(el("div", "file-size", formatSize(file.size)));
    card.append(info);
    box.append(card);
  }
  return box;
}

function renderEmbed(embed) {
  const box = el("div", "embed");
  if (embed.title) box.append(el("div", "author", embed.title));
  if (embed.description) {
    const text = el("div", "content");
    text.innerHTML = embed.description_html;
    box.append(text);
  }
  for (const field of embed.fields || []) {
    box.append(el("div", "author", field.name));
    const value = el("div", "content");
    value.innerHTML = field.value_html;
    box.append(value);
  }
  return box;
}

function renderComponents(message, components) {
  const wrap = el("div", "components");
  for (const row of components) {
    const line = el("div", "row");
    const items = row.type === 1 ? row.components || [] : [row];
    for (const item of items) line.append(renderComponent(message, item));
    wrap.append(line);
  }
  return wrap;
}

function renderComponent(message, item) {
  if (item.type === 2) {
    const button = el("button", `button style-${item.style || 2}`);
    button.textContent = `${item.emoji && item.emoji.name ? item.emoji.name + " " : ""}${item.label || ""}`;
    button.disabled = Boolean(item.disabled);
    button.dataset.customId = item.custom_id || "";
    button.dataset.testid = "button";
    if (item.style === 5 && item.url) {
      button.addEventListener("click", () => window.open(item.url, "_blank", "noopener"));
    } else {
      button.addEventListener("click", () => clickComponent(message.id, item.custom_id));
    }
    return button;
  }
  if (item.type >= 3 && item.type <= 8 && item.type !== 4) return renderSelect(message, item);
  return el("span", "note", `[component type ${item.type}]`);
}

// Options a select menu offers: its own (string select) or the guild's users,
// roles or channels (types 5-8), whose values are ids.
function selectOptions(item) {
  const state = app.state;
  const people = [...state.users, state.bot].map((u) => ({ label: `@${u.name}`, value: u.id }));
  const roles = state.roles.map((r) => ({ label: `@${r.name}`, value: r.id }));
  const channels = state.channels
    .filter((c) => !item.channel_types || item.channel_types.includes(c.type))
    .map((c) => ({ label: `# ${c.name}`, value: c.id }));
  return { 3: item.options || [], 5: people, 6: roles, 7: people.concat(roles), 8: channels }[item.type];
}

function renderSelect(message, item) {
  const most = Math.max(1, item.max_values || 1);
  const least = item.min_values === undefined ? 1 : item.min_values;
  const wrap = el("div", "select-wrap");
  const select = el("select", "select");
  select.dataset.customId = item.custom_id || "";
  select.dataset.testid = "select";
  select.multiple = most > 1;
  if (!select.multiple) {
    const prompt = el("option", "", item.placeholder || "Make a selection");
    prompt.value = "";
    prompt.disabled = true;
    prompt.selected = true;
    select.append(prompt);
  }
  for (const option of selectOptions(item)) {
    const label = `${option.emoji && option.emoji.name ? option.emoji.name + " " : ""}${option.label}`;
    const node = el("option", "", option.description ? `${label} — ${option.description}` : label);
    node.value = option.value;
    if (option.default) node.selected = true;
    select.append(node);
  }
  select.disabled = Boolean(item.disabled);
  wrap.append(select);
  const chosen = () => Array.from(select.selectedOptions).map((o) => o.value).filter(Boolean);
  const send = () => {
    const values = chosen();
    if (values.length < least || values.length > most) {
      showError(`choose ${least === most ? least : `${least} to ${most}`} option${most > 1 ? "s" : ""}`);
      return;
    }
    clickComponent(message.id, item.custom_id, values);
  };
  if (select.multiple) {
    const apply = el("button", "button style-1", "Choose");
    apply.type = "button";
    apply.disabled = select.disabled;
    apply.dataset.testid = "select-apply";
    apply.addEventListener("click", send);
    wrap.append(apply);
  } else {
    select.addEventListener("change", send);
  }
  return wrap;
}

async function clickComponent(messageId, customId, values) {
  const body = { message_id: messageId, custom_id: customId, user_id: app.viewer };
  if (values) body.values = values;
  try {
    await api("POST", "/api/click", body);
    showError("");
  } catch (err) {
    showError(err.message);
  }
}

// -- composer --------------------------------------------------------------

function showError(text) {
  ui.error.textContent = text;
  ui.error.hidden = !text;
}

function renderHelp(filter) {
  const entries = app.state ? app.state.commands : [];
  const wanted = filter.replace(/^\//, "").trim().toLowerCase();
  const shown = entries.filter((e) => wanted === "help" || wanted === ""
    || e.usage.slice(1).toLowerCase().startsWith(wanted));
  ui.help.replaceChildren();
  const list = shown.length ? shown : entries;
  for (const entry of list) {
    const item = el("div", "help-item");
    item.dataset.testid = "help-item";
    item.append(el("code", "", entry.usage), el("span", "", entry.description));
    item.addEventListener("click", () => {
      const base = entry.usage.split(" ").filter((w) => !w.includes(":") && !w.startsWith("[")).join(" ");
      ui.composer.value = `${base} `;
      ui.composer.focus();
      ui.help.hidden = true;
    });
    ui.help.append(item);
  }
  if (!entries.length) ui.help.append(el("div", "note", "The bot has not registered commands yet."));
  ui.help.hidden = false;
}

// -- files -----------------------------------------------------------------

function addFiles(files) {
  const limits = app.state.limits;
  const wanted = Array.from(files);
  const tooBig = wanted.find((f) => f.size > limits.file_bytes);
  if (tooBig) {
    showError(`${tooBig.name} is ${formatSize(tooBig.size)}: Discord allows `
      + `${formatSize(limits.file_bytes)} per file`);
    return;
  }
  if (app.pending.length + wanted.length > limits.files) {
    showError(`Discord allows ${limits.files} files per message`);
    return;
  }
  app.pending.push(...wanted);
  showError("");
  renderPending();
}

function renderPending() {
  ui.pending.replaceChildren();
  app.pending.forEach((file, index) => {
    const chip = el("div", "pending-file");
    chip.dataset.testid = "pending-file";
    chip.dataset.filename = file.name;
    chip.append(el("span", "", `📎 ${file.name}`), el("span", "file-size", formatSize(file.size)));
    const remove = el("button", "remove", "×");
    remove.type = "button";
    remove.title = `Remove ${file.name}`;
    remove.addEventListener("click", () => { app.pending.splice(index, 1); renderPending(); });
    chip.append(remove);
    ui.pending.append(chip);
  });
  ui.pending.hidden = !app.pending.length;
}

function uploadForm(text) {
  const form = new FormData();
  form.append("channel_id", app.channelId);
  form.append("user_id", app.viewer);
  form.append("content", text);
  for (const file of app.pending) form.append("files", file, file.name);
  return form;
}

ui.attach.addEventListener("click", () => ui.fileInput.click());
ui.fileInput.addEventListener("change", () => {
  addFiles(ui.fileInput.files);
  ui.fileInput.value = "";
});
let dragDepth = 0;
const carriesFiles = (event) => event.dataTransfer && Array.from(event.dataTransfer.types).includes("Files");
ui.main.addEventListener("dragenter", (event) => {
  if (!carriesFiles(event)) return;
  event.preventDefault();
  dragDepth += 1;
  ui.dropOverlay.hidden = false;
});
ui.main.addEventListener("dragover", (event) => { if (carriesFiles(event)) event.preventDefault(); });
ui.main.addEventListener("dragleave", () => {
  dragDepth = Math.max(0, dragDepth - 1);
  if (!dragDepth) ui.dropOverlay.hidden = true;
});
ui.main.addEventListener("drop", (event) => {
  if (!carriesFiles(event)) return;
  event.preventDefault();
  dragDepth = 0;
  ui.dropOverlay.hidden = true;
  addFiles(event.dataTransfer.files);
});
ui.composer.addEventListener("paste", (event) => {
  if (event.clipboardData && event.clipboardData.files.length) {
    event.preventDefault();
    addFiles(event.clipboardData.files);
  }
});

async function submit() {
  const text = ui.composer.value.trim();
  const files = app.pending.length > 0;
  if ((!text && !files) || !app.channelId) return;
  if (!files && (text === "/" || text === "/help")) { renderHelp("/help"); return; }
  if (text.length > app.state.limits.content) {
    showError(`a message may be ${app.state.limits.content} characters at most (this one is ${text.length})`);
    return;
  }
  try {
    if (text.startsWith("/") && files) {
      throw new Error("a slash command cannot carry files: send the files as a message");
    } else if (text.startsWith("/")) {
      await api("POST", "/api/command", { channel_id: app.channelId, user_id: app.viewer, text });
    } else if (files) {
      await api("POST", "/api/messages", uploadForm(text));
      app.pending = [];
      renderPending();
    } else {
      await api("POST", "/api/messages", { channel_id: app.channelId, user_id: app.viewer, content: text });
    }
    ui.composer.value = "";
    ui.help.hidden = true;
    showError("");
  } catch (err) {
    showError(err.message);
  }
}

ui.form.addEventListener("submit", (event) => { event.preventDefault(); submit(); });
ui.composer.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); submit(); }
  if (event.key === "Escape") ui.help.hidden = true;
});
ui.composer.addEventListener("input", () => {
  showError("");  // the person is onto the next thing: the last error no longer applies
  const text = ui.composer.value;
  if (text.startsWith("/") && !text.includes(":")) renderHelp(text); else ui.help.hidden = true;
  clearTimeout(app.suggestTimer);
  if (text.startsWith("/") && TYPING_OPTION.test(text)) {
    app.suggestTimer = setTimeout(() => suggest(text), 120);  // once the typing pauses
  }
});

// -- autocomplete: the bot's choices for the option being typed, as in Discord's client

const TYPING_OPTION = /(?:^|\s)([\w-]+):([^\s"'“„«]*)$/;

async function suggest(text) {
  const seq = ++app.suggestSeq;
  let data;
  try {
    data = await api("POST", "/api/autocomplete",
      { channel_id: app.channelId, user_id: app.viewer, text });
  } catch (_) {
    return;  // no choices, as Discord shows none when the bot does not answer
  }
  if (seq !== app.suggestSeq || ui.composer.value !== text) return;  // typed on meanwhile
  renderChoices(text, data.choices);
}

function renderChoices(text, choices) {
  ui.help.replaceChildren();
  ui.help.hidden = !choices.length;
  const typed = text.match(TYPING_OPTION);
  const head = text.slice(0, text.length - typed[2].length);  // up to the option's value
  for (const choice of choices) {
    const item = el("div", "help-item choice");
    item.dataset.testid = "choice";
    item.dataset.value = choice.value;
    item.append(el("span", "", choice.name));
    item.addEventListener("click", () => {
      const value = /\s/.test(choice.value) ? `"${choice.value.replace(/"/g, '\\"')}"` : choice.value;
      ui.composer.value = `${head}${value} `;
      ui.composer.focus();
      ui.help.hidden = true;
    });
    ui.help.append(item);
  }
}
ui.userSelect.addEventListener("change", () => {
  app.viewer = ui.userSelect.value;
  localStorage.setItem("playground.viewer", app.viewer);
  loadMessages();
});

// -- live updates ----------------------------------------------------------

function connectEvents() {
  const source = new EventSource("/api/events");
  source.onmessage = async (event) => {
    const change = JSON.parse(event.data);
    if (change.tree) await loadState();
    let sidebarDirty = false;
    for (const id of change.channels) {
      if (id === app.channelId) continue;
      if (!app.unread.has(id)) { app.unread.add(id); sidebarDirty = true; }
    }
    if (sidebarDirty && !change.tree) renderChannels();
    if (change.channels.includes(app.channelId)) await loadMessages();
  };
  source.addEventListener("hello", () => { loadState().then(loadMessages); });
}

(async function start() {
  await loadState();
  await loadMessages();
  connectEvents();
  document.body.dataset.ready = "true";
})().catch((err) => showError(`cannot reach the playground: ${err.message}`));
