// Modal dialogs (the native <dialog>) for the console's changes: nothing is changed until the
// person presses the dialog's confirm button.

import { el, fill } from "./dom.js";

// Opens a dialog. `body` is a node (or nodes); `confirm` is { label, danger, enabled } and
// `onConfirm(dialog)` runs when it is pressed: its error (if any) shows in the dialog, which
// stays open; when it returns, the dialog closes (unless it returned false: a next step). Returns { dialog, confirmButton, error(msg) }.
export function openDialog({ title, body, confirm, onConfirm, extraButtons = [] }) {
  const error = el("div", { class: "form-error", role: "alert" });
  const confirmButton = el("button", {
    type: "button",
    class: confirm.danger ? "danger solid" : "primary",
    "data-role": "confirm",
    disabled: confirm.enabled === false,
  }, confirm.label);
  const cancel = el("button", { type: "button", "data-role": "cancel" }, "Cancel");
  const dialog = el("dialog", { "aria-label": title },
    el("h2", {}, title),
    el("div", { class: "dialog-body" }, body, error),
    el("div", { class: "dialog-foot" }, extraButtons, cancel, confirmButton));
  const handle = {
    dialog,
    confirmButton,
    error: (message) => fill(error, message || ""),
    close: () => { dialog.close(); dialog.remove(); },
  };
  cancel.addEventListener("click", handle.close);
  dialog.addEventListener("cancel", () => dialog.remove());
  confirmButton.addEventListener("click", async () => {
    confirmButton.disabled = true;
    handle.error("");
    try {
      if ((await onConfirm(handle)) === false) confirmButton.disabled = false;
      else handle.close();
    } catch (e) {
      handle.error(e.message || String(e));
      confirmButton.disabled = false;
    }
  });
  document.body.append(dialog);
  dialog.showModal();
  return handle;
}

export function field(label, input, { inline } = {}) {
  return el("label", { class: `field${inline ? " inline" : ""}` }, inline ? [input, label] : [label, input]);
}
