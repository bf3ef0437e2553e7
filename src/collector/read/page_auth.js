  // The admin token, when the daemon requires one. A browser cannot add a bearer header to a
  // page it navigates to, so the pages (HTML with no data) are served without it and their
  // script sends it on every API request: kept in this tab's sessionStorage (gone with the
  // tab), read once from a `#token=…` fragment (never sent to the server, removed from the
  // address bar at once) or typed into the box shown after a 401. No cookie: the API still
  // answers only requests that carry the token themselves.
  const auth = (() => {
    const KEY = "toolsize.token";
    const store = {
      get() { try { return sessionStorage.getItem(KEY); } catch (e) { return null; } },
      set(t) { try { if (t) sessionStorage.setItem(KEY, t); else sessionStorage.removeItem(KEY); } catch (e) { /* storage off */ } },
    };
    const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (m) {
      store.set(decodeURIComponent(m[1]).trim());
      history.replaceState(null, "", location.pathname + location.search);
    }
    let box = null;
    return {
      // `h` with `authorization: Bearer <token>` when a token is known.
      headers(h) {
        const t = store.get();
        if (t) h.authorization = "Bearer " + t;
        return h;
      },
      // After a 401 of a request sent with `sent` (the headers from `headers`): the sign-in
      // box, once; the token that was refused is forgotten, but not one stored since the
      // request left (typed while it was answered: the page is reloading with it).
      refused(sent) {
        const used = sent && sent.authorization ? sent.authorization.slice("Bearer ".length) : null;
        const had = used !== null;
        if (store.get() === used) store.set(null);
        if (box) return;
        const input = document.createElement("input");
        input.type = "password";
        input.id = "token-input";
        input.autocomplete = "current-password";
        input.placeholder = "token";
        const button = document.createElement("button");
        button.type = "submit";
        button.textContent = "Sign in";
        const label = document.createElement("label");
        label.htmlFor = "token-input";
        label.textContent = had
          ? "The daemon refused this token. Token: "
          : "This daemon requires its token (auth.token). Token: ";
        box = document.createElement("form");
        box.id = "signin";
        box.append(label, input, " ", button);
        box.addEventListener("submit", (e) => {
          e.preventDefault();
          store.set(input.value.trim());
          location.reload();
        });
        document.body.prepend(box);
        input.focus();
      },
    };
  })();
