// phasewatch pages: theme toggle, auto-refresh of server-rendered regions, the API helper
// (bearer token asked for once on a 401, kept in sessionStorage), forms that call the API.
"use strict";

(function () {
  const TOKEN_KEY = "phasewatch-token";
  const THEME_KEY = "phasewatch-theme";
  const THEMES = ["auto", "light", "dark"];
  const refreshSeconds = Number(document.body.dataset.refreshSeconds || 30);
  let lastRefresh = Date.now();
  let refreshing = false;

  // Theme -----------------------------------------------------------------------------------

  function currentTheme() {
    const stored = localStorage.getItem(THEME_KEY);
    return THEMES.includes(stored) ? stored : "auto";
  }

  function applyTheme(theme) {
    if (theme === "auto") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = theme;
    const button = document.getElementById("theme-toggle");
    if (button) {
      button.textContent = "Theme: " + theme;
      button.setAttribute("aria-label", "Colour theme: " + theme + " (press to change)");
    }
    document.dispatchEvent(new CustomEvent("phasewatch:theme"));
  }

  function toggleTheme() {
    const next = THEMES[(THEMES.indexOf(currentTheme()) + 1) % THEMES.length];
    localStorage.setItem(THEME_KEY, next);
    applyTheme(next);
  }

  // API with a bearer token -------------------------------------------------------------------

  function askForToken() {
    const dialog = document.getElementById("token-dialog");
    const input = dialog.querySelector("input[name=token]");
    input.value = "";
    dialog.returnValue = "";
    return new Promise(function (resolve) {
      dialog.addEventListener(
        "close",
        function () {
          const token = dialog.returnValue === "ok" ? input.value.trim() : "";
          if (token) sessionStorage.setItem(TOKEN_KEY, token);
          resolve(token);
        },
        { once: true },
      );
      dialog.showModal();
      input.focus();
    });
  }

  async function send(method, url, body) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(url, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
  }

  // On a 401 the token is missing or wrong: ask once, then retry with the new one.
  async function api(method, url, body) {
    let response = await send(method, url, body);
    if (response.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      const token = await askForToken();
      if (!token) return response;
      response = await send(method, url, body);
    }
    return response;
  }

  async function problem(response) {
    try {
      const data = await response.json();
      const detail = data.detail;
      if (typeof detail === "string") return detail;
      return JSON.stringify(detail);
    } catch (error) {
      return response.statusText || String(response.status);
    }
  }

  // Forms that call the JSON API ------------------------------------------------------------

  function formBody(form) {
    const body = {};
    for (const [name, value] of new FormData(form).entries()) {
      if (value === "") continue;
      if (name.startsWith("matcher.")) {
        body.matchers = body.matchers || [];
        body.matchers.push({ name: name.slice(8), value: value, isRegex: false });
      } else if (form.elements[name] && form.elements[name].type === "number") {
        body[name] = Number(value);
      } else {
        body[name] = value;
      }
    }
    return body;
  }

  async function submitApiForm(event) {
    const form = event.target.closest("form[data-api]");
    if (!form) return;
    event.preventDefault();
    const result = document.querySelector("[data-result]");
    const button = form.querySelector("button[type=submit], button:not([type])");
    if (button) button.disabled = true;
    try {
      const response = await api(form.dataset.method || "POST", form.dataset.api, formBody(form));
      if (result) {
        result.hidden = false;
        result.className = "notice " + (response.ok ? "ok" : "error");
        result.textContent = response.ok ? form.dataset.done || "Done." : "Refused: " + (await problem(response));
      }
      if (response.ok) {
        await refresh(true);
        if (result) result.focus();
      }
    } catch (error) {
      if (result) {
        result.hidden = false;
        result.className = "notice error";
        result.textContent = "Could not reach the server: " + error;
      }
    } finally {
      if (button) button.disabled = false;
    }
  }

  // Auto-refresh: regions marked data-refresh-id are replaced from a fresh copy of the page --

  function focusInside(element) {
    return element.contains(document.activeElement) && document.activeElement !== document.body;
  }

  // force: replace every region, even the one holding focus (after the user's own action).
  async function refresh(force) {
    if (refreshing) return;
    refreshing = true;
    const status = document.getElementById("refresh-status");
    try {
      const response = await fetch(location.href, { headers: { Accept: "text/html" } });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const region of document.querySelectorAll("[data-refresh-id]")) {
        const replacement = fresh.querySelector('[data-refresh-id="' + region.dataset.refreshId + '"]');
        // Never pull the rug from under a keyboard user: a region holding focus waits.
        if (replacement && (force || !focusInside(region))) region.innerHTML = replacement.innerHTML;
      }
      applyFilter();
      document.dispatchEvent(new CustomEvent("phasewatch:refresh"));
      if (status) status.textContent = "updated " + new Date().toISOString().slice(11, 19) + " UTC";
    } catch (error) {
      if (status) status.textContent = "refresh failed (" + error.message + "), retrying";
    } finally {
      lastRefresh = Date.now();
      refreshing = false;
    }
  }

  function tick() {
    if (document.visibilityState !== "visible") return;
    if (Date.now() - lastRefresh >= refreshSeconds * 1000) refresh();
  }

  // Overview filter ---------------------------------------------------------------------------

  function applyFilter() {
    const input = document.getElementById("row-filter");
    if (!input) return;
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const row of document.querySelectorAll("#overview-table tbody tr")) {
      const text = (row.dataset.target + " " + row.dataset.vantage).toLowerCase();
      row.hidden = !words.every(function (word) { return text.includes(word); });
    }
  }

  // Wiring ------------------------------------------------------------------------------------

  window.phasewatch = {
    api: api,
    refresh: refresh,
    phaseColours: JSON.parse(document.getElementById("phase-colours").textContent),
    cssVar: function (name) {
      return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    },
  };

  applyTheme(currentTheme());
  // The system's scheme can change under "auto" (dusk, a user's setting): charts redraw.
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", function () {
    document.dispatchEvent(new CustomEvent("phasewatch:theme"));
  });
  document.getElementById("theme-toggle").addEventListener("click", toggleTheme);
  document.addEventListener("submit", submitApiForm);
  // Cancel is a plain button: Enter in the token field must submit the token, not cancel.
  document.addEventListener("click", function (event) {
    const button = event.target.closest("[data-close-dialog]");
    if (button) button.closest("dialog").close("cancel");
  });
  document.addEventListener("input", function (event) {
    if (event.target.id === "row-filter") applyFilter();
  });
  document.addEventListener("visibilitychange", tick);
  if (refreshSeconds > 0) setInterval(tick, 1000);
})();
