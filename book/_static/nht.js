// nht-book: a tap on a figure opens the image full size (book/_ext/nht_pages.py adds this file).
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("article figure img, article .cell_output img").forEach(function (img) {
    if (img.closest("a")) { return; }
    var link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.className = "nht-full";
    link.title = "open the figure full size";
    img.parentNode.insertBefore(link, img);
    link.appendChild(img);
  });
});
