// Search from disk. Opened as file://, a browser refuses `new Worker(url)` (the page's origin is opaque), so the
// theme's search worker never starts. Under file:// only, this runs a worker's script in a hidden same-origin
// iframe instead and carries its messages both ways (what the theme's offline plugin gets from the iframe-worker
// package on unpkg.com, written here so that the site loads nothing from the network). The search index itself is
// site/search.js (Zensical) or site/search/search_index.js (Material for MkDocs), written by `python -m docgen.offline`.
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class FileWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.onerror = null;
      this.onmessageerror = null;
      this._queue = [];
      this._ready = false;
      this._frame = document.createElement("iframe");
      this._frame.style.display = "none";
      this._frame.setAttribute("aria-hidden", "true");
      document.documentElement.appendChild(this._frame);
      const scope = this._frame.contentWindow;
      // the worker's `self.postMessage(data)` reaches the page's `worker.onmessage`
      scope.postMessage = (data) => setTimeout(() => this._emit("message", data), 0);
      scope.importScripts = () => { throw new Error("importScripts is not available under file://"); };
      scope.onerror = (message) => { this._emit("error", message); return true; };
      const script = scope.document.createElement("script");
      script.src = new URL(url, document.baseURI).href;
      script.onload = () => {
        this._ready = true;
        for (const data of this._queue.splice(0)) this._deliver(data);
      };
      script.onerror = () => this._emit("error", "could not load " + script.src);
      scope.document.documentElement.appendChild(script);
    }

    postMessage(data) {
      if (this._ready) this._deliver(data);
      else this._queue.push(data);
    }

    terminate() {
      this._frame.remove();
      this._queue = [];
    }

    _deliver(data) {
      const scope = this._frame.contentWindow;
      if (!scope) return;
      let copy = data;
      try { copy = structuredClone(data); } catch (e) { /* plain objects only; pass as is */ }
      setTimeout(() => scope.dispatchEvent(new scope.MessageEvent("message", { data: copy })), 0);
    }

    _emit(type, data) {
      const event = type === "message" ? new MessageEvent("message", { data: data })
        : new ErrorEvent("error", { message: String(data) });
      const handler = type === "message" ? this.onmessage : this.onerror;
      if (handler) handler.call(this, event);
      this.dispatchEvent(event);
    }
  }

  window.Worker = FileWorker;
})();
