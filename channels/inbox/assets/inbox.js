/* <newsletter-inbox subscriber hash [base]>: the in-app inbox (docs/channels.md).
   base: the routes' root; by default where this script was loaded from. */
(() => {
const src = document.currentScript && document.currentScript.src;
const css = `:host{--a:var(--inbox-accent,#2563eb);--bg:var(--inbox-bg,#fff);--fg:var(--inbox-fg,#1f2937);--mu:var(--inbox-muted,#6b7280);--r:var(--inbox-radius,8px);--l:color-mix(in srgb,var(--fg) 14%,transparent);position:relative;display:inline-block;font:14px/1.4 var(--inbox-font,system-ui,sans-serif);color:var(--fg)}
[hidden]{display:none!important}
button{font:inherit;color:inherit;cursor:pointer}
:focus-visible{outline:2px solid var(--a);outline-offset:2px}
[part=bell]{position:relative;display:grid;place-items:center;width:2.5rem;height:2.5rem;padding:0;border:0;border-radius:50%;background:none}[part=bell]:hover{background:var(--l)}
[part=badge]{position:absolute;top:1px;right:-2px;min-width:1.15rem;height:1.15rem;padding:0 .3rem;box-sizing:border-box;border-radius:999px;background:var(--a);color:#fff;font-size:.7rem;font-weight:600;line-height:1.15rem}
[part=panel]{position:absolute;right:0;top:calc(100% + 6px);z-index:1000;width:min(24rem,calc(100vw - 1rem));max-height:min(32rem,75vh);overflow:auto;background:var(--bg);color:var(--fg);border:1px solid var(--l);border-radius:var(--r);box-shadow:0 8px 24px rgb(0 0 0/.15);text-align:left}[part=panel][data-left]{left:0;right:auto}
[part=header]{display:flex;justify-content:space-between;align-items:center;gap:.5rem;padding:.6rem .8rem;border-bottom:1px solid var(--l)}
ul{list-style:none;margin:0;padding:0}
li{padding:.7rem .8rem;border-bottom:1px solid var(--l)}
li[part~=unread]{box-shadow:inset 3px 0 var(--a)}
[part=title]{font-weight:600}
li[part~=read] [part=title]{font-weight:400;color:var(--mu)}
[part=title] a{color:inherit}
[part=body]{margin:.25rem 0;overflow-wrap:anywhere}[part=body] p{margin:0 0 .4em}
[part=body] a{color:var(--a)}[part=body] img{max-width:100%}
[part=time]{display:block;color:var(--mu);font-size:.8em}
[part=actions]{display:flex;gap:.4rem;margin-top:.4rem}
[part~=button]{background:none;border:1px solid var(--l);border-radius:calc(var(--r)/2);padding:.15rem .55rem;font-size:.8rem;color:var(--a)}
[part~=more]{display:block;margin:.6rem auto}
[part=status]{margin:0;padding:.5rem .8rem;color:var(--mu)}[part=status]:empty{display:none}
[part=empty]{color:var(--mu);text-align:center;padding:1.5rem}`;
// Constructed: a page's CSP need not allow inline styles.
const sheet = new CSSStyleSheet();
sheet.replaceSync(css);
const bell = '<svg viewBox="0 0 24 24" width="22" height="22" aria-hidden="true"><path fill="currentColor" d="M12 22a2 2 0 0 0 2-2h-4a2 2 0 0 0 2 2Zm6-6v-5c0-3.1-1.6-5.6-4.5-6.3V4a1.5 1.5 0 0 0-3 0v.7C7.6 5.4 6 7.9 6 11v5l-2 2v1h16v-1l-2-2Z"/></svg>';
const el = (tag, part, text) => {
  const e = document.createElement(tag);
  e.setAttribute('part', part);
  if (text != null) e.textContent = text;
  return e;
};

class NewsletterInbox extends HTMLElement {
  static observedAttributes = ['subscriber', 'hash', 'base'];

  constructor() {
    super();
    const r = this.attachShadow({ mode: 'open' });
    r.adoptedStyleSheets = [sheet];
    r.innerHTML = `<button part="bell" aria-expanded="false" aria-controls="p">${bell}<span part="badge" hidden></span></button>` +
      '<div part="panel" id="p" role="dialog" tabindex="-1" aria-label="Inbox" hidden><div part="header"><strong>Inbox</strong><button part="button read-all">Mark all read</button></div>' +
      '<p part="status" role="status"></p><ul part="list"></ul><button part="button more" hidden>Load more</button></div>';
    const q = (s) => r.querySelector(s);
    this.$ = { bell: q('[part=bell]'), badge: q('[part=badge]'), panel: q('[part=panel]'), list: q('ul'), status: q('[part=status]'), more: q('[part~=more]') };
    this.$.bell.onclick = () => this.toggle();
    this.$.more.onclick = () => this.load(this.next);
    q('[part~=read-all]').onclick = () => this.readAll();
    this.$.panel.onkeydown = (e) => { if (e.key === 'Escape') { this.toggle(false); this.$.bell.focus(); } };
    this.$.list.onclick = (e) => {
      const b = e.target.closest('button[data-do]');
      if (b) this.mark(b.closest('li').dataset.id, b.dataset.do);
    };
    this.outside = (e) => { if (this.open && !e.composedPath().includes(this)) this.toggle(false); };
  }

  // The routes' root, ending in "/".
  get base() {
    const b = new URL(this.getAttribute('base') || (src ? new URL('.', src).href : '/inbox/'), document.baseURI).href;
    return b.endsWith('/') ? b : b + '/';
  }

  connectedCallback() { document.addEventListener('click', this.outside); this.restart(); }
  disconnectedCallback() { document.removeEventListener('click', this.outside); this.stop(); }
  attributeChangedCallback() { this.restart(); }

  // Once for the attributes set together.
  restart() {
    if (this.pending) return;
    this.pending = true;
    queueMicrotask(() => { this.pending = false; if (this.isConnected) this.start(); });
  }

  start() {
    this.stop();
    const s = this.getAttribute('subscriber'), h = this.getAttribute('hash');
    this.items = []; this.next = ''; this.loaded = false;
    this.render(); this.count(0);
    this.h = s && h ? { 'X-Inbox-Subscriber': s, 'X-Inbox-Hash': h } : null;
    if (!this.h) return;
    if (this.open) this.load();
    // EventSource sends no headers (so: the query) and resumes by itself.
    const es = this.es = new EventSource(new URL('stream?' + new URLSearchParams({ subscriber: s, hash: h }), this.base));
    const on = (kind, f) => es.addEventListener(kind, (e) => { try { f(JSON.parse(e.data)); } catch {} });
    on('count', (d) => this.count(d.unread));
    on('message', (m) => this.upsert(m, true));
    on('update', (m) => this.upsert(m));
    on('reset', () => (this.loaded ? this.load() : this.call('count').then((d) => this.count(d.unread), () => {})));
  }

  stop() { if (this.es) this.es.close(); this.es = null; }

  async call(path, post) {
    const r = await fetch(new URL(path, this.base), { method: post ? 'POST' : 'GET', headers: this.h, credentials: 'omit' });
    if (!r.ok) throw new Error('inbox: ' + r.status);
    return r.json();
  }

  say(text) { this.$.status.textContent = text; }

  toggle(open = !this.open) {
    this.open = open;
    const p = this.$.panel, b = this.getBoundingClientRect();
    p.hidden = !open;
    // Open towards the wider side of the window.
    p.toggleAttribute('data-left', b.left + b.right < innerWidth);
    this.$.bell.setAttribute('aria-expanded', open);
    if (open && !this.loaded && this.h) this.load();
  }

  count(n) {
    n = Math.max(0, n | 0);
    this.$.badge.hidden = !n;
    this.$.badge.textContent = n > 99 ? '99+' : n;
    this.$.bell.setAttribute('aria-label', `Inbox, ${n} unread`);
  }

  async load(cursor) {
    const h = this.h;
    this.say('Loading…');
    try {
      const a = await this.call('messages' + (cursor ? '?cursor=' + encodeURIComponent(cursor) : ''));
      if (h !== this.h) return; // the attributes changed meanwhile
      this.items = cursor ? this.items.concat(a.messages) : a.messages;
      this.next = a.next || '';
      this.loaded = true;
      this.count(a.unread);
      this.say('');
    } catch {
      this.say('Could not load the inbox.');
    }
    this.render();
  }

  // A new message first, a changed one in place, an archived one gone.
  upsert(m, isNew) {
    if (!this.loaded || !m || !m.id) return;
    const i = this.items.findIndex((x) => x.id === m.id);
    if (m.archived) { if (i >= 0) this.items.splice(i, 1); } else if (i >= 0) this.items[i] = m;
    else if (isNew) this.items.unshift(m);
    else return;
    this.render();
  }

  async act(path, then) {
    try { then(await this.call(path, true)); } catch { this.say('Could not save, please retry.'); }
  }

  mark(id, what) {
    this.act(`messages/${encodeURIComponent(id)}/${what}`, (a) => { this.upsert(a.message); this.count(a.unread); });
  }

  readAll() {
    this.act('read-all', (a) => { this.items.forEach((m) => { m.read = true; }); this.count(a.unread); this.render(); });
  }

  render() {
    const list = this.$.list;
    // The focus stays on the button it was on, or goes to the panel.
    const f = this.shadowRoot.activeElement, id = f && f.dataset.do && f.closest('li').dataset.id;
    const n = f && f.dataset.do === 'archive' ? 2 : 1;
    list.replaceChildren(...this.items.map((m) => this.item(m)));
    if (this.loaded && !this.items.length) list.append(el('li', 'empty', 'Nothing here yet.'));
    this.$.more.hidden = !this.next;
    if (id) (list.querySelector(`[data-id="${CSS.escape(id)}"] button:nth-child(${n})`) || this.$.panel).focus();
  }

  item(m) {
    const li = el('li', 'item ' + (m.read ? 'read' : 'unread'));
    li.dataset.id = m.id;
    const title = li.appendChild(el('div', 'title'));
    let href = '';
    try { href = /^https?:$/.test(new URL(m.url).protocol) ? m.url : ''; } catch {}
    if (href) { const a = title.appendChild(el('a', 'link', m.title)); a.href = href; } else title.textContent = m.title;
    if (m.body) {
      // HTML the service sanitised, parsed inert by a template.
      const t = document.createElement('template');
      t.innerHTML = m.body;
      li.appendChild(el('div', 'body')).append(t.content);
    }
    const time = li.appendChild(el('time', 'time'));
    const d = new Date(m.created);
    if (!isNaN(d)) { time.dateTime = m.created; time.textContent = d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }); }
    const act = li.appendChild(el('div', 'actions'));
    for (const [what, label] of [m.read ? ['unread', 'Mark unread'] : ['read', 'Mark read'], ['archive', 'Archive']]) {
      const b = act.appendChild(el('button', 'button', label));
      b.dataset.do = what;
      b.setAttribute('aria-label', `${label}: ${m.title}`);
    }
    return li;
  }
}

if (!customElements.get('newsletter-inbox')) customElements.define('newsletter-inbox', NewsletterInbox);
})();
